"""deploy/components/prometheus: it renders, scrapes what stszone serves, and its alerts fire
when they should (``promtool check rules`` / ``promtool test rules``, Debian's prometheus)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.rendered import Obj, base_with, container, only, validate
from tests.test_zone_risk import cluster
from tests.tools import require
from webhook.cli import build_parser, settings_from
from webhook.rules.risk import RiskScan
from webhook.server.metrics import Metrics
from webhook.server.riskmetrics import ZoneRisk

CASES = Path(__file__).parent / "prometheus" / "alerts-test.yaml"
CRDS = {"ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    return base_with(tmp_path_factory.mktemp("prom"), "prometheus")


@pytest.fixture
def rules_dir(tmp_path: Path, rendered: list[Obj]) -> Path:
    """The PrometheusRule's groups as a plain rules file, beside a copy of the test cases."""
    (tmp_path / "rules.yaml").write_text(
        yaml.safe_dump(only(rendered, "PrometheusRule")["spec"], sort_keys=False)
    )
    shutil.copy(CASES, tmp_path / CASES.name)
    return tmp_path


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = require("promtool", why="checking the PrometheusRule of deploy/components/prometheus")
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_rules_pass_promtool_check(rules_dir: Path) -> None:
    """Every expression parses, every alert has its labels and annotations in shape."""
    done = promtool("check", "rules", "rules.yaml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout, done.stdout


def test_alerts_fire_exactly_in_the_cases_written_down(rules_dir: Path) -> None:
    """tests/prometheus/alerts-test.yaml: which alert fires when, with which words."""
    done = promtool("test", "rules", CASES.name, cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_name_only_metrics_stszone_exports(rendered: list[Obj]) -> None:
    """A renamed metric would silence an alert: every stszone_* name in the rules is served."""
    risk = ZoneRisk(RiskScan(cluster()), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    metrics = Metrics(
        ready=lambda: True,
        certificate=lambda: __import__("datetime").datetime(2030, 1, 1),
        rendered=[risk.exposition],
    )
    metrics.observe("mutate", None, None, 0.001, 400)
    served = set(re.findall(r"^# TYPE (stszone_\w+) ", metrics.exposition().decode(), re.M))
    served |= {f"{name}_total" for name in served}  # counters are named *_total in samples
    groups = only(rendered, "PrometheusRule")["spec"]["groups"]
    text = "\n".join(rule["expr"] for group in groups for rule in group["rules"])
    used = set(re.findall(r"\b(stszone_[a-z_]+)", text))
    assert len(used) == 7, used
    assert used <= served, used - served


def test_the_component_serves_metrics_on_a_port_the_service_monitor_scrapes(
    rendered: list[Obj],
) -> None:
    """--metrics-port 8080 -> container port "metrics" -> Service stszone-metrics -> monitor."""
    validate([obj for obj in rendered if obj["kind"] not in CRDS])
    webhook = container(rendered)
    settings = settings_from(build_parser().parse_args(["serve", *webhook["args"]]))
    ports = {port["name"]: port["containerPort"] for port in webhook["ports"]}
    assert ports == {"https": 8443, "metrics": settings.metrics_port}
    services = {obj["metadata"]["name"]: obj for obj in rendered if obj["kind"] == "Service"}
    metrics_service = services["stszone-metrics"]
    assert metrics_service["spec"]["ports"][0]["targetPort"] == "metrics"
    pod_labels = only(rendered, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert metrics_service["spec"]["selector"].items() <= pod_labels.items()
    monitor = only(rendered, "ServiceMonitor")["spec"]
    selected = [
        name
        for name, service in services.items()
        if monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    ]
    assert selected == ["stszone-metrics"]
    assert [e["port"] for e in monitor["endpoints"]] == ["metrics"]
    namespace = metrics_service["metadata"]["namespace"]
    assert monitor["namespaceSelector"]["matchNames"] == [namespace]
    # The alerts use job="stszone": the monitor takes the job from this Service label.
    assert metrics_service["metadata"]["labels"][monitor["jobLabel"]] == "stszone"
