"""The unit tier (tests/conftest.py): what the static reading lets in, the runtime guard keeps in process."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_unit_test_that_starts_a_process_or_connects_fails_and_a_cluster_test_is_not_unit(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nmarkers =\n    unit: in process\n")
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(test_probe='''
import socket

def test_plain():
    assert 1 + 1 == 2

def test_sneaks_a_process():  # the name is built, so the static reading cannot see it
    __import__("sub" + "process").run(["true"])

def test_sneaks_a_connection():
    with socket.socket() as sock:
        sock.connect(("192.0.2.1", 9))

def test_on_the_cluster(cluster_address):
    pass
''')
    unit = pytester.runpytest_inprocess("-m", "unit", "-p", "no:cacheprovider", "-q")
    unit.assert_outcomes(passed=1, failed=2, deselected=1)
    unit.stdout.fnmatch_lines(["*a unit-tier test started a process*", "*a unit-tier test opened a TCP connection*"])
