"""Shared pytest options and fixtures.

Options
    ``--soak``      run the long randomized tests (marker ``soak``); also ``MXU_SOAK=1``.
    ``--quick``     only the tests that need no simulator (``make quick``): cocotb tests, tool
                    flows (marker ``flow``: Yosys, nextpnr, whole-system lint) and tests with a
                    ``simulator`` argument are deselected, and a test that starts Amaranth's
                    simulator is skipped when it does.
    ``--seed N``    seed for every randomized test; also ``MXU_SEED=N``. Without it each test
                    draws its own seed and prints it, so any failure can be replayed.

Hypothesis profiles
    ``ci`` (default): 40 examples per property, so the property tests take seconds; ``soak`` (with
    ``--soak``): 2,000 examples each. A failing property prints the seed to replay it
    (``--hypothesis-seed``) and the smallest failing input.

Run record
    Every run writes ``<build>/verification/last_run.json`` (:mod:`sim.test_record`): per test its
    outcome, duration, seed, the simulators it ran, the count of result values it compared bit for bit
    and of memory bytes it compared with a shadow memory (:func:`verif.checked.count`, in the test or in
    a cocotb bench's simulator process), with the run's date, commit and arguments; ``mxu report``
    shows it per suite.

Fixtures
    ``soak``        bool: soak mode is on.
    ``seed``        int: the test's random seed (printed; shown in the report of a failing test).
    ``simulator``   every test that takes a ``simulator`` argument runs once per entry of
                    :data:`SIMULATORS`. A simulator that is not installed skips the test, except
                    when ``CI=true``: then the test fails, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path

import pytest

from sim.toolchain import SimulatorUnavailable, check_simulator

SIMULATORS: list[str] = ["verilator", "icarus"]
"""Simulators every ``simulator``-parametrized test runs on."""

_TRUE = {"1", "true", "yes", "on"}


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxu")
    group.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run long randomized soak tests (marker 'soak'); also enabled by MXU_SOAK=1",
    )
    group.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="only the tests that need no simulator (no cocotb, no Amaranth simulation)",
    )
    group.addoption(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="random seed for every randomized test (default: $MXU_SEED, else a fresh random seed per test, printed)",
    )


def _soak_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--soak")) or _env_true("MXU_SOAK")


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, settings

    # deadline: every model call is bounded; a property example taking seconds is a defect
    settings.register_profile("ci", max_examples=40, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("soak", max_examples=2000, deadline=10000, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("soak" if _soak_enabled(config) else "ci")


_RUN: list[dict] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each test's outcome for the run record (on the controller under xdist: the workers'
    reports reach it with their user properties)."""
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        props = dict(report.user_properties)
        checked = [v for k, v in report.user_properties if k == "checked"]  # several counts add up
        _RUN.append(
            {
                "nodeid": report.nodeid,
                "outcome": report.outcome,
                "duration_s": round(report.duration, 2),
                "seed": props.get("seed"),
                "simulators": sorted({v for k, v in report.user_properties if k == "simulator"}),
                "checked": sum(checked) if checked else None,
                "checked_bytes": sum(v for k, v in report.user_properties if k == "checked_bytes") or None,
            }
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or not _RUN:
        return
    from sim import test_record

    cfg = session.config
    test_record.write(
        _RUN,
        args=[str(a) for a in cfg.invocation_params.args],
        options={
            "soak": _soak_enabled(cfg),
            "quick": bool(cfg.getoption("--quick")),
            "seed": cfg.getoption("--seed") or os.environ.get("MXU_SEED") or "random per test",
        },
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed = config.getoption("--seed")
    if seed is None and os.environ.get("MXU_SEED"):
        seed = os.environ["MXU_SEED"]
    return [
        f"mxu: soak={'on' if _soak_enabled(config) else 'off'} "
        f"(hypothesis profile {'soak' if _soak_enabled(config) else 'ci'}), "
        f"seed={seed if seed is not None else 'random per test'}, "
        f"simulators={','.join(SIMULATORS)}, CI={os.environ.get('CI', '')!r}"
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--quick"):
        keep = [
            i
            for i in items
            if i.get_closest_marker("cocotb") is None
            and i.get_closest_marker("flow") is None
            and "simulator" not in getattr(i, "fixturenames", ())
        ]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    if _soak_enabled(config):
        return
    skip = pytest.mark.skip(reason="soak test: enable with --soak or MXU_SOAK=1")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "simulator" not in metafunc.fixturenames:
        return
    # A test that parametrizes 'simulator' itself chooses its own list.
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "simulator" in names:
            return
    metafunc.parametrize("simulator", SIMULATORS, indirect=True, ids=SIMULATORS)


@pytest.fixture
def simulator(request: pytest.FixtureRequest) -> str:
    """The simulator this test instance runs on; skips (fails under CI=true) if missing."""
    name: str = request.param
    request.node.user_properties.append(("simulator", name))
    try:
        check_simulator(name)
    except SimulatorUnavailable as exc:
        problem = str(exc)
    else:
        return name
    if _env_true("CI"):
        pytest.fail(f"CI=true and simulator {name!r} is unavailable: {problem}", pytrace=False)
    pytest.skip(f"simulator {name!r} unavailable: {problem}")


@pytest.fixture(autouse=True)
def _quick_skips_amaranth_simulation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``--quick``, a test that starts Amaranth's simulator is skipped at that point."""
    if not request.config.getoption("--quick"):
        return
    import amaranth.sim

    def skip(*args, **kwargs):
        pytest.skip("runs Amaranth's simulator (not in --quick)")

    monkeypatch.setattr(amaranth.sim.Simulator, "__init__", skip)


@pytest.fixture(autouse=True)
def _record_node(request: pytest.FixtureRequest):
    """Point :mod:`sim.test_context` (simulators run) at the running test."""
    from sim import test_context

    test_context.current_node = request.node
    yield
    test_context.current_node = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Point :data:`verif.checked.ENV` at a fresh file for the test's call, which the simulators it
    starts inherit, and add the values and bytes its benches compared to the test's record."""
    import tempfile

    from verif import checked

    fd, name = tempfile.mkstemp(prefix="mxu-checked-", suffix=".txt")
    os.close(fd)
    old = os.environ.get(checked.ENV)
    os.environ[checked.ENV] = name
    try:
        return (yield)
    finally:
        if old is None:
            os.environ.pop(checked.ENV, None)
        else:
            os.environ[checked.ENV] = old
        got = checked.totals(Path(name))
        os.unlink(name)
        if got.get("values"):
            item.user_properties.append(("checked", got["values"]))
        if got.get("bytes"):
            item.user_properties.append(("checked_bytes", got["bytes"]))


@pytest.fixture(scope="session")
def soak(pytestconfig: pytest.Config) -> bool:
    """``True`` when soak mode is on (``--soak`` or ``MXU_SOAK=1``)."""
    return _soak_enabled(pytestconfig)


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This test's random seed: ``--seed``, else ``$MXU_SEED``, else a fresh random one.

    The seed is printed (pytest shows it with a failing test's captured output) and recorded
    in the test report's ``user_properties`` (JUnit XML).
    """
    value = request.config.getoption("--seed")
    if value is None:
        raw = os.environ.get("MXU_SEED", "").strip()
        if raw:
            try:
                value = int(raw, 0)
            except ValueError:
                raise pytest.UsageError(f"MXU_SEED={raw!r} is not an integer") from None
    if value is None:
        value = random.SystemRandom().randrange(2**32)
    print(f"seed={value} (replay with --seed {value} or MXU_SEED={value})")
    request.node.user_properties.append(("seed", value))
    return value


@pytest.fixture
def pyrng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """A ``random.Random`` derived from this test's printed ``seed`` and its node name, so each
    parametrized case draws its own stream and any failure replays with ``--seed``."""
    return random.Random(seed * 1_000_003 + zlib.crc32(request.node.name.encode()))
