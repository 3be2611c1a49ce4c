"""``spanwatch mib-module``: a MIB the generator was never written against (held back, made up here) plus
a few lines of choices give a module that validates, and that the engine reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from collector.errors import ConfigError
from collector.sources.snmp.tables import load_file
from spanwatch.cli import main

pytest.importorskip("pysmi")

# A made-up vendor MIB: a table indexed by IF-MIB's ifIndex and a lane, a power in 0.01 dBm, an OSNR as
# a decimal string, and a status enum. It imports from the SMI modules and IF-MIB, as vendor MIBs do.
HELD_BACK = """\
EXAMPLE-COHERENT-MIB DEFINITIONS ::= BEGIN
IMPORTS
    MODULE-IDENTITY, OBJECT-TYPE, Integer32, Unsigned32, enterprises FROM SNMPv2-SMI
    DisplayString FROM SNMPv2-TC
    ifIndex FROM IF-MIB;

exampleCoherent MODULE-IDENTITY
    LAST-UPDATED "202612010000Z"
    ORGANIZATION "none"
    CONTACT-INFO "none"
    DESCRIPTION "Held back from the generator's development."
    ::= { enterprises 64999 3 }

exLaneTable OBJECT-TYPE
    SYNTAX SEQUENCE OF ExLaneEntry
    MAX-ACCESS not-accessible
    STATUS current
    DESCRIPTION "Per-lane readings."
    ::= { exampleCoherent 1 }

exLaneEntry OBJECT-TYPE
    SYNTAX ExLaneEntry
    MAX-ACCESS not-accessible
    STATUS current
    DESCRIPTION "One lane."
    INDEX { ifIndex, exLaneNumber }
    ::= { exLaneTable 1 }

ExLaneEntry ::= SEQUENCE { exLaneNumber Unsigned32, exLaneRxPower Integer32, exLaneOsnr DisplayString,
    exLaneState INTEGER }

exLaneNumber OBJECT-TYPE
    SYNTAX Unsigned32 (1..16)
    MAX-ACCESS not-accessible
    STATUS current
    DESCRIPTION "Lane."
    ::= { exLaneEntry 1 }

exLaneRxPower OBJECT-TYPE
    SYNTAX Integer32
    UNITS "0.01 dBm"
    MAX-ACCESS read-only
    STATUS current
    DESCRIPTION "Received power."
    ::= { exLaneEntry 2 }

exLaneOsnr OBJECT-TYPE
    SYNTAX DisplayString
    UNITS "dB"
    MAX-ACCESS read-only
    STATUS current
    DESCRIPTION "OSNR as text."
    ::= { exLaneEntry 5 }

exLaneState OBJECT-TYPE
    SYNTAX INTEGER { up(1), down(2) }
    MAX-ACCESS read-only
    STATUS current
    DESCRIPTION "State."
    ::= { exLaneEntry 6 }
END
"""

CHOICES = {
    "table": "exLaneTable",
    "labels": {"interface": "ifIndex", "lane": "exLaneNumber"},
    "columns": {
        "exLaneRxPower": "dci_optics_rx_power_dbm",
        "exLaneOsnr": {"metric": "dci_optics_osnr_db"},
        "exLaneState": {"metric": "dci_interface_oper_up", "enum": {1: 1, 2: 0}},
    },
}


def _files(tmp_path: Path, choices: dict[str, object]) -> tuple[Path, Path]:
    mib = tmp_path / "EXAMPLE-COHERENT-MIB.txt"
    mib.write_text(HELD_BACK)
    path = tmp_path / "choices.yaml"
    path.write_text(yaml.safe_dump(choices))
    return mib, path


def test_held_back_mib_gives_a_valid_module(tmp_path: Path) -> None:
    mib, choices = _files(tmp_path, CHOICES)
    out = tmp_path / "example_coherent.yaml"
    assert main(["mib-module", str(mib), "--choices", str(choices), "--out", str(out)]) == 0
    module = load_file(out)  # the shipped modules' validation
    (table,) = module.tables
    assert table.entry == "1.3.6.1.4.1.64999.3.1.1"
    assert table.index == ("ifIndex", "exLaneNumber")
    assert table.labels == {"interface": "ifIndex", "lane": "exLaneNumber"}
    by_column = {c.column: c for c in table.columns}
    assert by_column[2].metric == "dci_optics_rx_power_dbm" and by_column[2].scale == 0.01  # from UNITS
    assert by_column[5].text and by_column[5].scale == 1.0  # a number sent as a string
    assert by_column[6].enum == {1: 1.0, 2: 0.0}


def test_wrong_choices_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {**CHOICES, "columns": {"exLaneNope": "dci_optics_rx_power_dbm", "exLaneOsnr": "dci_bogus"}}
    mib, choices = _files(tmp_path, bad)
    assert main(["mib-module", str(mib), "--choices", str(choices)]) == 1
    err = capsys.readouterr().err
    assert "columns.exLaneNope: not a column of exLaneEntry" in err
    mib, choices = _files(tmp_path, {**CHOICES, "columns": {"exLaneOsnr": "dci_bogus"}})
    assert main(["mib-module", str(mib), "--choices", str(choices)]) == 1
    assert "'dci_bogus' is not in the metric catalogue" in capsys.readouterr().err


def test_a_table_the_mib_lacks(tmp_path: Path) -> None:
    from collector.mib_module import Choices, compile_mib, generate

    mib, _ = _files(tmp_path, CHOICES)
    with pytest.raises(ConfigError, match="tables: exLaneTable"):
        generate(compile_mib(mib, []), Choices.model_validate({**CHOICES, "table": "exNope"}))
