"""The collector config the simulated fabric hands out reads what its telemetry serves."""

from __future__ import annotations

from spanwatch.sim import scenario as sc
from spanwatch.sim.runtime import GNMI_SETS, SimulatedFabric


async def test_a_gnmi_only_fabric_is_subscribed_to_its_interfaces_too() -> None:
    # Without SNMP the interfaces (speed, counters, oper-status) come over gNMI, or no wave down is seen
    # but by the optics and no link capacity is known for the steady serialization.
    base = sc.builtin(duration=10.0)
    for snmp, interfaces in ((True, False), (False, True)):
        s = base.model_copy(update={"telemetry": sc.Telemetry(snmp=snmp, gnmi=True)})
        fabric = SimulatedFabric(s)
        await fabric.start()
        try:
            targets = fabric.collector_config("127.0.0.1:0")["targets"]
        finally:
            await fabric.stop()
        for target in targets:
            subscriptions = target["gnmi"]["subscriptions"]
            assert ("interfaces" in subscriptions) is interfaces
            assert set(GNMI_SETS) <= set(subscriptions)
            assert ("snmp" in target) is snmp
