"""One-shot commands for trying a target before the daemon runs it (Telegraf's ``--test``, gnmic's verbs).

- ``spanwatch poll --config FILE --target NAME --once``: one SNMP poll and one gNMI ONCE subscription of
  the target, with the config's modules, sets, secrets and TLS; prints every sample the collector would
  export (catalogue name, labels, value), then what it skipped and why. Nothing is served or archived.
- ``spanwatch gnmi capabilities|get|subscribe ADDRESS [PATH...]``: raw gNMI RPCs with the same TLS and
  secret options as a target's ``gnmi`` section; responses are printed as JSON lines (protojson, JSON
  values decoded), ``subscribe --once`` ends at the target's sync_response.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from collector import mapping_files
from collector.config import Defaults, GnmiConfig, Target
from collector.errors import ConfigError, SourceError, SpanwatchError
from collector.mapping_files import Mappings
from collector.model import Sample
from collector.sources.gnmi.paths import SubscriptionSpec, combined_table

# -- spanwatch poll -----------------------------------------------------------------------------------


def poll_arguments(p: argparse.ArgumentParser) -> None:
    """``poll`` options."""
    p.add_argument("--config", required=True, type=Path, help="the YAML config file")
    p.add_argument("--target", required=True, help="the target's name in the config")
    p.add_argument(
        "--once", action="store_true", required=True, help="poll once and print (the only mode: required)"
    )


def poll(args: argparse.Namespace) -> int:
    """Poll one target once and print its samples and what was skipped; 1 when nothing answered."""
    config, mappings = mapping_files.load(args.config)
    try:
        target = config.target(args.target)
    except StopIteration:
        names = ", ".join(t.name for t in config.targets) or "none"
        raise ConfigError(f"--target: no target named {args.target!r} (targets: {names})") from None
    return asyncio.run(_poll(target, config.defaults, mappings, sys.stdout))


async def _poll(target: Target, defaults: Defaults, mappings: Mappings, out: TextIO) -> int:
    failed = 0
    if target.snmp is not None:
        failed += not await _poll_snmp(target, defaults, mappings, out)
    if target.gnmi is not None:
        failed += not await _poll_gnmi(target, mappings, out)
    return 1 if failed else 0


async def _poll_snmp(target: Target, defaults: Defaults, mappings: Mappings, out: TextIO) -> bool:
    from collector.sources.snmp.source import SnmpSource

    assert target.snmp is not None
    modules = mappings.snmp_modules(target)
    source = SnmpSource(target.name, target.snmp, defaults, modules=modules)
    timeout = target.snmp.timeout or defaults.timeout
    try:
        samples = await asyncio.wait_for(source.poll(), timeout * 4)  # labels + every table: a few walks
    except (SourceError, TimeoutError) as e:
        print(f"# {target.name} snmp: poll failed: {e or 'no complete answer in time'}", file=out)
        return False
    finally:
        await source.close()
    skipped: list[str] = []
    produced = {s.metric for s in samples}
    for name, module in modules.items():
        tables: list[tuple[str, set[str]]] = [(t.name, {c.metric for c in t.columns}) for t in module.tables]
        tables += [(t.name, {r.metric for r in t.rules}) for t in module.sensors]
        for table, wanted in tables:
            key = f"{name}.{table}"
            if key in source.absent:
                skipped.append(f"{key}: no rows on this device (table absent, or the agent refused it)")
                continue
            for metric in sorted(wanted - produced):
                skipped.append(
                    f"{key}: {metric}: no row gave a value (missing, a no-reading value, or not a number)"
                )
    _print(out, f"{target.name} snmp", samples, skipped)
    return True


async def _poll_gnmi(target: Target, mappings: Mappings, out: TextIO) -> bool:
    import grpc

    from collector.sources.gnmi.client import GnmiClient, call_metadata, open_channel, subscribe_request
    from collector.sources.gnmi.decode import Decoder

    assert target.gnmi is not None
    cfg = target.gnmi
    sets = mappings.gnmi_sets(target)
    samples: list[Sample] = []
    skipped: list[str] = []
    channel = open_channel(cfg)
    try:
        client = GnmiClient(channel, call_metadata(cfg))
        # one ONCE subscription per prefix target, as the daemon opens one stream per prefix target
        for prefix_target in dict.fromkeys(s.target for s in sets):
            group = [s for s in sets if s.target == prefix_target]
            subs = [sub for s in group for sub in s.subscriptions]
            request = subscribe_request(subs, mode="once", encoding=cfg.encoding, target=prefix_target)
            decoder = Decoder(combined_table(group))
            for response in await client.once(request):
                if response.HasField("update"):
                    found, missed = _decode(decoder, response.update)
                    samples += found
                    skipped += missed
    except grpc.aio.AioRpcError as e:
        print(f"# {target.name} gnmi: subscribe failed: {e.code().name}: {e.details()}", file=out)
        return False
    finally:
        await channel.close()
    _print(out, f"{target.name} gnmi", samples, sorted(set(skipped)))
    return True


def _decode(decoder: Any, notification: Any) -> tuple[list[Sample], list[str]]:
    """The samples of one notification, and each update that gave none (with its path)."""
    from pygnmi.spec.v080 import gnmi_pb2

    from collector.sources.gnmi.decode import normalise

    samples, _ = decoder.notification(notification)
    missed = []
    for update in notification.update:
        single = gnmi_pb2.Notification(
            prefix=notification.prefix, update=[update], timestamp=notification.timestamp
        )
        found, _ = decoder.notification(single)
        if not found:
            path = "/" + "/".join(
                name + "".join(f"[{k}={v}]" for k, v in sorted(keys.items()))
                for name, keys in normalise(notification.prefix, update.path)
            )
            missed.append(f"{path}: no catalogue mapping in the subscribed sets (or not a number)")
    return samples, missed


def _print(out: TextIO, what: str, samples: list[Sample], skipped: Iterable[str]) -> None:
    skipped = list(skipped)
    print(f"# {what}: {len(samples)} samples, {len(skipped)} skipped", file=out)
    for s in sorted(samples, key=lambda s: (s.metric, s.labels)):
        labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
        print(f"{s.metric}{{{labels}}} {s.value:.10g}", file=out)
    for reason in skipped:
        print(f"# skipped: {reason}", file=out)


# -- spanwatch gnmi -----------------------------------------------------------------------------------


def gnmi_arguments(p: argparse.ArgumentParser) -> None:
    """``gnmi`` options: the verb, the address, paths, and a target's gNMI transport options."""
    p.add_argument("verb", choices=["capabilities", "get", "subscribe"])
    p.add_argument("address", help="host:port of the gNMI target")
    p.add_argument("paths", nargs="*", metavar="PATH", help="paths, [origin:]/a/b[k=v]/c")
    p.add_argument("--once", action="store_true", help="subscribe: ONCE, ending at sync_response")
    p.add_argument("--count", type=int, default=None, help="subscribe: stop after this many responses")
    p.add_argument(
        "--set", dest="sets", action="append", default=[], help="subscribe to a subscription set's paths"
    )
    p.add_argument("--target", dest="prefix_target", help="the gNMI prefix target (SONiC's COUNTERS_DB)")
    p.add_argument("--encoding", default="json_ietf", choices=["proto", "json", "json_ietf"])
    p.add_argument("--sample-interval", type=float, default=10.0, help="subscribe: seconds between samples")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for the RPC")
    tls = p.add_argument_group("transport (as a target's gnmi section)")
    tls.add_argument("--insecure", action="store_true", help="plaintext, explicitly")
    for key in ("ca_file", "cert_file", "key_file"):
        tls.add_argument(f"--{key.replace('_', '-')}", dest=key, type=Path)
    tls.add_argument("--server-name", help="the name the certificate is checked against")
    for key in ("username_env", "username_file", "password_env", "password_file"):
        tls.add_argument(f"--{key.replace('_', '-')}", dest=key)


def gnmi_config(args: argparse.Namespace) -> GnmiConfig:
    """The options as a target's ``gnmi`` section, validated by the same schema.

    Raises:
        ConfigError: the options are inconsistent (neither or both of TLS and --insecure, ...).
    """
    from pydantic import ValidationError

    from collector.config import _located  # one wording for every config problem

    raw: dict[str, Any] = {"address": args.address, "insecure": args.insecure, "encoding": args.encoding}
    tls = {
        k: getattr(args, k) for k in ("ca_file", "cert_file", "key_file", "server_name") if getattr(args, k)
    }
    if tls or not args.insecure:
        raw["tls"] = {k: str(v) for k, v in tls.items()}
    raw |= {
        k: getattr(args, k)
        for k in ("username_env", "username_file", "password_env", "password_file")
        if getattr(args, k)
    }
    # Typing --insecure beside a credential option is the explicit opt-in; call_metadata still warns.
    raw["plaintext_credentials"] = args.insecure and any(k.endswith(("_env", "_file")) for k in raw)
    try:
        return GnmiConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(*(_located(err) for err in e.errors())) from None


def gnmi(args: argparse.Namespace) -> int:
    """Run one gNMI RPC and print the responses as JSON lines."""
    cfg = gnmi_config(args)
    return asyncio.run(_gnmi(args, cfg, sys.stdout))


async def _gnmi(args: argparse.Namespace, cfg: GnmiConfig, out: TextIO) -> int:
    import grpc

    from collector.sources.gnmi.client import GnmiClient, call_metadata, open_channel, subscribe_request

    channel = open_channel(cfg)
    try:
        client = GnmiClient(channel, call_metadata(cfg))
        if args.verb == "capabilities":
            _emit(out, await client.capabilities(args.timeout))
        elif args.verb == "get":
            if not args.paths:
                raise SpanwatchError("gnmi get: give at least one PATH")
            _emit(out, await client.get(args.paths, cfg.encoding, args.timeout))
        else:
            subs = [SubscriptionSpec(path=p) for p in args.paths] + _set_paths(args.sets)
            if not subs:
                raise SpanwatchError("gnmi subscribe: give at least one PATH or --set")
            request = subscribe_request(
                subs,
                mode="once" if args.once else "stream",
                sample_interval_s=args.sample_interval,
                encoding=cfg.encoding,
                target=args.prefix_target,
            )
            if args.once:
                for response in await client.once(request, args.timeout):
                    _emit(out, response)
            else:
                await _stream(client, request, args.count, out)
    except grpc.aio.AioRpcError as e:
        hint = ""
        details = (e.details() or "").lower()
        handshake = any(word in details for word in ("ssl", "tls", "handshake"))
        if not cfg.insecure and e.code() == grpc.StatusCode.UNAVAILABLE and handshake:
            # A TLS handshake with a plaintext server fails with a raw SSL error: say what it usually means.
            hint = " (a TLS handshake failed: if the target serves plaintext gNMI, add --insecure)"
        raise SpanwatchError(
            f"gnmi {args.verb} {cfg.address}: {e.code().name}: {e.details()}{hint}"
        ) from None
    finally:
        await channel.close()
    return 0


async def _stream(client: Any, request: Any, count: int | None, out: TextIO) -> None:
    import grpc

    call = await client.subscribe(request)
    seen = 0
    try:
        while count is None or seen < count:
            response = await call.read()
            if response is grpc.aio.EOF:
                break
            _emit(out, response)
            seen += 1
    finally:
        call.cancel()


def _set_paths(names: list[str]) -> list[SubscriptionSpec]:
    from collector.sources.gnmi.paths import load_set

    out: list[SubscriptionSpec] = []
    for name in names:
        try:
            out += load_set(name).subscriptions
        except SpanwatchError as e:
            raise SpanwatchError(f"--set {name}: {e}") from None
    return out


def _emit(out: TextIO, message: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    print(json.dumps(_decoded(MessageToDict(message)), sort_keys=True), file=out, flush=True)


def _decoded(node: Any) -> Any:
    """protojson with JSON values shown as JSON, not base64 (what a person wants to read)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("jsonVal", "jsonIetfVal") and isinstance(v, str):
                with contextlib.suppress(ValueError):
                    v = json.loads(base64.b64decode(v))
            out[k] = _decoded(v)
        return out
    if isinstance(node, list):
        return [_decoded(v) for v in node]
    return node
