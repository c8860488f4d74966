"""Errors as the documented exceptions: one base class, a subclass per status code."""

import os
import pathlib
import secrets
import stat

import pytest

import ardma
from conftest import Server


def test_the_hierarchy():
    for name in ["NotFoundError", "UnavailableError", "PermissionDeniedError",
                 "InvalidArgumentError", "DeadlineExceededError", "OutOfRangeError"]:
        cls = getattr(ardma, name)
        assert issubclass(cls, ardma.Error) and cls.__module__ == "ardma"
    assert ardma.NotFoundError.code == "NOT_FOUND"
    assert issubclass(ardma.NotFoundError, LookupError)
    assert issubclass(ardma.InvalidArgumentError, ValueError)
    assert issubclass(ardma.DeadlineExceededError, TimeoutError)
    assert issubclass(ardma.UnavailableError, ConnectionError)


def test_a_server_that_is_down(transport):
    address = "127.0.0.1:1" if transport == "tcp" else "ucx://127.0.0.1:1"
    with pytest.raises(ardma.UnavailableError, match="127.0.0.1:1"):
        ardma.Client(address, connect_timeout=0.5)


def test_a_server_that_goes_away(transport):
    s = Server()
    client = ardma.Client(s.address_for(transport), timeout=2.0, connect_timeout=0.5)
    client.ping()
    s.stop()
    with pytest.raises((ardma.UnavailableError, ardma.DeadlineExceededError)):
        client.ping()


def test_permission_denied_with_an_auth_file(tmp_path, transport):
    secret_all, secret_read = secrets.token_hex(32), secrets.token_hex(32)
    auth = tmp_path / "auth"
    auth.write_text(f"admin {secret_all} all\nreader {secret_read} read\n")
    auth.chmod(stat.S_IRUSR | stat.S_IWUSR)
    reader = tmp_path / "reader"
    reader.write_text(f"reader {secret_read}\n")
    reader.chmod(stat.S_IRUSR | stat.S_IWUSR)
    s = Server("--auth-file", str(auth))
    try:
        with pytest.raises(ardma.UnauthenticatedError):
            ardma.Client(s.address_for(transport)).ping()
        client = ardma.Client(s.address_for(transport), auth_file=str(reader))
        client.ping()
        with pytest.raises(ardma.PermissionDeniedError):
            ardma.Dht(client).put("t", b"k", b"v")  # needs exec (and load)
    finally:
        s.stop()


def test_bad_arguments(client):
    with pytest.raises(ardma.InvalidArgumentError, match="mode"):
        ardma.Dht(client, mode="fast")
    with pytest.raises(TypeError):
        ardma.Dht(client).put("t", 5, b"v")  # a key is bytes or str
