"""tests/noskip.py: under STSZONE_NO_SKIP=1 a skip fails with its reason; otherwise it stays a skip.

Each case runs a small suite of its own in a pytest session of its own (pytester), with the
plugin loaded by name as the conftest loads it, and reads the outcomes pytest counts.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

IN_TESTS = """
import pytest

def test_missing_tool():
    pytest.skip("promtool is not on PATH; apt-get install -y prometheus")

@pytest.mark.skipif(True, reason="needs a cluster")
def test_marked():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    raise AssertionError

def test_passes():
    pass
"""
AT_COLLECTION = """
import pytest

pytest.skip("whole module: no cluster", allow_module_level=True)

def test_never_collected():
    pass
"""
FAILURE = "STSZONE_NO_SKIP=1 (set by .ci/run) makes a skip a failure: "


def run(pytester: pytest.Pytester, source: str, *, no_skip: str | None) -> pytest.RunResult:
    """``source`` as a test module, run by a pytest session of its own with the plugin."""
    pytester.makepyfile(test_suite=source)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("STSZONE_NO_SKIP", raising=False)
        if no_skip is not None:
            patch.setenv("STSZONE_NO_SKIP", no_skip)
        # The inner session reads no pyproject.toml: the one setting pytest-asyncio warns without.
        scope = "-oasyncio_default_fixture_loop_scope=function"
        return pytester.runpytest_inprocess("-p", "tests.noskip", "-rfEs", scope)


@pytest.mark.parametrize("no_skip", [None, "0"])
def test_a_skip_stays_a_skip_unless_asked(pytester: pytest.Pytester, no_skip: str | None) -> None:
    """Without STSZONE_NO_SKIP=1 (unset, or any other value) the plugin changes nothing."""
    result = run(pytester, IN_TESTS, no_skip=no_skip)
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == 0
    assert run(pytester, AT_COLLECTION, no_skip=no_skip).ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_under_no_skip_a_skipped_test_fails_with_its_reason(pytester: pytest.Pytester) -> None:
    """pytest.skip in a test fails, a skipif mark errors (it skips at setup), each saying why;
    the xfail and the passing test are left alone."""
    result = run(pytester, IN_TESTS, no_skip="1")
    result.assert_outcomes(passed=1, failed=1, errors=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"*{FAILURE}Skipped: needs a cluster",  # errors are reported first
            f"*{FAILURE}Skipped: promtool is not on PATH; apt-get install -y prometheus",
        ]
    )


def test_under_no_skip_a_module_skipped_at_collection_is_an_error(
    pytester: pytest.Pytester,
) -> None:
    """A module that skips while it is collected stops the run with its reason."""
    result = run(pytester, AT_COLLECTION, no_skip="1")
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*{FAILURE}Skipped: whole module: no cluster"])


def test_the_suite_loads_the_plugin(request: pytest.FixtureRequest) -> None:
    """tests/conftest.py loads it, so .ci/run's variable reaches every test of the suite."""
    assert request.config.pluginmanager.has_plugin("tests.noskip")
