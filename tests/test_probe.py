"""The host's matmul probe and the plan's CPU rates carried from the calibrating host to this one."""

from __future__ import annotations

import json

import pytest
from workflow_tiny import REPO

from entropy_lens.model import probe
from entropy_lens.workflow import plan
from entropy_lens.workflow.settings import load_config

SMALL = (64, 64, 64)


def test_the_probe_measures_both_dtypes_on_one_thread_and_gives_the_threads_back():
    import torch

    before = torch.get_num_threads()
    rates = probe.measure_host_rates(SMALL, repeats=2)
    assert rates.float32 > 0 and rates.bfloat16 > 0 and rates.host == probe.host_name()
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="repeats >= 1"):
        probe.measure_host_rates(SMALL, repeats=0)
    with pytest.raises(ValueError, match="host rate float32 must be > 0"):
        probe.HostRates("cpu", 0.0, 1.0)


def test_a_host_is_probed_once_and_a_damaged_cache_is_probed_again(tmp_path, monkeypatch):
    calls = []

    def fake(*_args):
        calls.append(1)
        return probe.HostRates(probe.host_name(), 100.0 * len(calls), 300.0)

    monkeypatch.setattr(probe, "measure_host_rates", fake)
    first = probe.host_rates(tmp_path)
    assert probe.host_rates(tmp_path) == first and len(calls) == 1  # read back, not probed again
    (cached,) = tmp_path.glob("*.json")
    assert json.loads(cached.read_text())["float32"] == 100.0 and not list(tmp_path.glob("*.part"))
    cached.write_text("{not json")
    assert probe.host_rates(tmp_path).float32 == 200.0 and len(calls) == 2
    cached.write_text(json.dumps({"host": "another CPU [avx2]", "float32": 1.0, "bfloat16": 1.0}))
    assert probe.host_rates(tmp_path).float32 == 300.0  # another host's file under this name is not trusted


def test_rates_scale_by_the_two_hosts_probes():
    calibrated = plan.PlanSettings(
        cpu_gflops=50.0, cpu_bf16_gflops=120.0, cpu_probe_gflops=100.0, cpu_probe_bf16_gflops=300.0
    )
    here = calibrated.for_host(200.0, 30.0)  # float32 twice as fast, bfloat16 ten times slower (software)
    assert (here.cpu_gflops, here.cpu_bf16_gflops) == pytest.approx((100.0, 12.0))
    assert (here.cpu_probe_gflops, here.cpu_probe_bf16_gflops) == (200.0, 30.0)
    assert here.cpu_gbps == calibrated.cpu_gbps and here.cuda_gflops == calibrated.cuda_gflops
    assert here.for_host(100.0, 300.0).cpu_gflops == pytest.approx(50.0)  # and back
    with pytest.raises(ValueError, match="no calibrating host's probe"):
        plan.PlanSettings().for_host(1.0, 1.0)
    with pytest.raises(ValueError, match="must be > 0"):
        calibrated.for_host(0.0, 1.0)


def test_a_cpu_plan_follows_the_host_probe_and_a_cuda_plan_does_not(monkeypatch):
    config = load_config(REPO / "config.yaml")
    recorded = {"cpu_probe_gflops": 100.0, "cpu_probe_bf16_gflops": 300.0}
    config["plan"] = {**config["plan"], **recorded}
    host = {"rates": probe.HostRates("here", 100.0, 300.0)}
    monkeypatch.setattr(probe, "host_rates", lambda cache=None: host["rates"])
    same = plan.plan_from_config(config)
    host["rates"] = probe.HostRates("here", 200.0, 300.0)
    faster = plan.plan_from_config(config)
    assert faster.settings.cpu_gflops == pytest.approx(2 * same.settings.cpu_gflops)
    job = same.job(plan.EXTRACT, "smollm2-135m", "tasks")
    twice = faster.job(plan.EXTRACT, "smollm2-135m", "tasks")
    matmul = job.terms[0] / (same.settings.cpu_gflops * same.run.threads * 1e9)  # float32 FLOPs
    assert job.est_s - twice.est_s == pytest.approx(matmul / 2, rel=1e-6)  # half the float32 matmul time
    bare = {k: v for k, v in config["plan"].items() if k not in recorded}
    unrecorded = plan.plan_from_config({**config, "plan": bare})
    assert unrecorded.settings.cpu_gflops == same.settings.cpu_gflops  # no probe recorded: rates as configured
    cuda = {**config, "compute": {**config["compute"], "device": "cuda"}}
    assert plan.plan_from_config(cuda).settings == plan.settings_from_config(config["plan"])
