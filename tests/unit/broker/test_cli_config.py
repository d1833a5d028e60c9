"""``folio standalone|broker|bookie``: --config, environment, flags; --print-config reads back."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from folio.cli import main

#: Each command, the flags it needs to print its settings, and one flag to override.
COMMANDS = [
    ("standalone", [], "--port", "7777"),
    ("broker", ["--bookies", "h:1,h:2", "--ensemble-size", "2"], "--write-quorum", "2"),
    ("bookie", ["--data-dir", "/srv/bookie", "--durability", "async"], "--port", "4000"),
]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("FOLIO_STANDALONE_", "FOLIO_BROKER_", "FOLIO_BOOKIE_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(("command", "needed", "flag", "value"), COMMANDS,
                         ids=[command for command, _, _, _ in COMMANDS])
def test_print_config_reads_back_and_layers_over_the_file(
        command: str, needed: list[str], flag: str, value: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, printed, err = _run(capsys, command, *needed, "--print-config")
    assert code == 0, err
    file = tmp_path / f"{command}.toml"
    file.write_text(printed)

    code, again, err = _run(capsys, command, "--config", str(file), "--print-config")
    assert (code, again) == (0, printed), err

    key = flag.removeprefix("--").replace("-", "_")
    code, flagged, err = _run(capsys, command, "--config", str(file), flag, value,
                              "--print-config")
    assert code == 0, err
    assert tomllib.loads(flagged)[command][key] == int(value)
    monkeypatch.setenv(f"FOLIO_{command.upper()}_{key.upper()}", value)
    code, from_env, err = _run(capsys, command, "--config", str(file), "--print-config")
    assert code == 0, err
    assert from_env == flagged


def test_existing_flags_and_variables_keep_working(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOLIO_STANDALONE_DATA_DIR", "/from/env")
    monkeypatch.setenv("FOLIO_STANDALONE_DURABILITY", "async")
    code, out, err = _run(capsys, "standalone", "--durability", "sync", "--max-held-ms", "5",
                          "--print-config")
    assert code == 0, err
    settings = tomllib.loads(out)["standalone"]
    assert (settings["data_dir"], settings["durability"], settings["max_held_ms"]) == (
        "/from/env", "sync", 5)
    code, out, err = _run(capsys, "broker", "--bookies", "a:1", "--print-config")
    assert code == 0, err
    assert "durability" not in out  # the bookies' setting, not the broker's
    with pytest.raises(SystemExit) as raised:
        main(["broker", "--bookies", "a:1", "--durability", "sync", "--print-config"])
    assert raised.value.code == 2
    assert "unrecognized arguments: --durability" in capsys.readouterr().err


def test_kafka_auto_creation_settings(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _run(capsys, "standalone", "--print-config")
    assert code == 0, err
    settings = tomllib.loads(out)["standalone"]
    # Kafka's defaults: auto.create.topics.enable=true, num.partitions=1.
    assert (settings["kafka_auto_create_topics"], settings["kafka_num_partitions"]) == (True, 1)
    monkeypatch.setenv("FOLIO_BROKER_KAFKA_AUTO_CREATE_TOPICS", "false")
    code, out, err = _run(capsys, "broker", "--bookies", "a:1", "--kafka-num-partitions", "6",
                          "--print-config")
    assert code == 0, err
    settings = tomllib.loads(out)["broker"]
    assert (settings["kafka_auto_create_topics"], settings["kafka_num_partitions"]) == (False, 6)
    code, out, err = _run(capsys, "standalone", "--no-kafka-auto-create-topics",
                          "--kafka-num-partitions", "0", "--print-config")
    assert (code, out) == (2, "")
    assert "kafka_num_partitions must be in [1, 1024], got 0" in err


def test_a_bad_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "bad.toml"
    file.write_text('[standalone]\nport = "seventy"\n')
    code, out, err = _run(capsys, "standalone", "--config", str(file), "--print-config")
    assert (code, out) == (2, "")
    assert f"folio standalone: error: --config {file}: [standalone] port = 'seventy'" in err
    file.write_text("[standalone]\nprot = 1\n")
    code, _, err = _run(capsys, "standalone", "--config", str(file), "--print-config")
    assert code == 2 and "[standalone] has no setting 'prot'" in err


def test_the_readme_example_configures_a_bookie_and_a_broker(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    file = tmp_path / "folio.toml"
    file.write_text(example)
    for command in ("bookie", "broker"):
        code, out, err = _run(capsys, command, "--config", str(file), "--print-config")
        assert code == 0, err
        assert tomllib.loads(out)[command]["data_dir"] == f"/var/lib/folio/{command}"
