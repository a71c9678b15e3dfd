"""``elmo serve`` refuses what it cannot serve on in one line, before the model loads (which is seconds for the
demo, minutes for a large model): a port out of range is a bad flag value (exit 2); a port in use and a host that is
not this machine's are found by binding the socket first (exit 1)."""

from __future__ import annotations

import socket

import pytest

from elmo.cli import main
from elmo.formats.model_ref import ModelRef


@pytest.fixture(autouse=True)
def no_model_loads(monkeypatch):
    """Loading the model is the slow step these errors must come before: here it fails the test."""

    def load(self, *args, **kwargs):
        raise AssertionError("the model was loaded before the error")

    monkeypatch.setattr(ModelRef, "load", load)


def one_line(text: str) -> str:
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text.rstrip("\n")


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_a_bad_flag_value(capsys, port):
    """Was a 73-line traceback from uvicorn after the model had loaded, exit 0."""
    with pytest.raises(SystemExit) as e:
        main(["serve", "--port", port])
    assert e.value.code == 2
    assert one_line(capsys.readouterr().err) == (
        f"elmo serve: error: argument --port: must be a TCP port, 0 to 65535 (0: any free port), got {port} (see "
        "elmo serve --help)")


def test_a_port_in_use_is_one_line_before_the_model_loads(capsys):
    """Was uvicorn's ERROR lines after the model had loaded, exit 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"elmo: error: cannot listen on 127.0.0.1:{port}: the port is in use (another process listens there): choose "
        "another --port")


def test_a_host_that_is_not_this_machine_s_is_one_line_before_the_model_loads(capsys):
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): no machine has it, and no DNS is asked
    assert main(["serve", "--host", "192.0.2.1"]) == 1
    assert one_line(capsys.readouterr().err) == (
        "elmo: error: cannot listen on 192.0.2.1:8080: 192.0.2.1 is not an address of this machine (cannot assign "
        "requested address)")


def test_a_host_that_does_not_resolve_is_one_line_before_the_model_loads(capsys):
    # a name no resolver is asked about: a label over 63 characters cannot be encoded (IDNA)
    host = "x" * 64 + ".example"
    assert main(["serve", "--host", host]) == 1
    error = one_line(capsys.readouterr().err)
    assert error.startswith(f"elmo: error: cannot listen on {host}:8080: the host does not resolve ("), error
