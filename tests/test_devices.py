"""Device claiming for extraction jobs (the CUDA path needs a GPU; its refusal does not)."""

import contextlib

import pytest
import torch

from entropy_lens.model.devices import claim_device


def test_cpu_is_always_available():
    with claim_device("cpu") as device:
        assert device == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_names_the_fix():
    with pytest.raises(ValueError, match=r"no CUDA device is visible; set compute\.device: cpu"), claim_device("cuda"):
        pass


def test_unknown_device_is_refused():
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'tpu'"), claim_device("tpu"):
        pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_jobs_claim_different_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("ENTROPY_LENS_GPU_LOCKS", str(tmp_path))
    n = torch.cuda.device_count()
    with claim_device("cuda") as first:
        if n > 1:
            with claim_device("cuda") as second:
                assert first != second
        else:
            with pytest.raises(RuntimeError, match="held by other jobs"), claim_device("cuda"):
                pass


def _two_fake_gpus(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ENTROPY_LENS_GPU_LOCKS", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_jobs_spread_over_gpus_before_sharing_one(tmp_path, monkeypatch):
    _two_fake_gpus(monkeypatch, tmp_path)
    monkeypatch.setenv("ENTROPY_LENS_JOBS_PER_GPU", "2")
    with contextlib.ExitStack() as stack:
        claimed = [stack.enter_context(claim_device("cuda")) for _ in range(4)]
        assert claimed == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
        with pytest.raises(RuntimeError, match=r"2 GPUs x 2 slots are held"), claim_device("cuda"):
            pass
    with claim_device("cuda") as again:  # every slot released on exit
        assert again == "cuda:0"


def test_one_job_per_gpu_by_default(tmp_path, monkeypatch):
    _two_fake_gpus(monkeypatch, tmp_path)
    monkeypatch.delenv("ENTROPY_LENS_JOBS_PER_GPU", raising=False)
    with (
        claim_device("cuda"),
        claim_device("cuda"),
        pytest.raises(RuntimeError, match="held by other jobs"),
        claim_device("cuda"),
    ):
        pass


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_bad_slot_count_is_refused_by_name(tmp_path, monkeypatch, value):
    _two_fake_gpus(monkeypatch, tmp_path)
    monkeypatch.setenv("ENTROPY_LENS_JOBS_PER_GPU", value)
    message = f"ENTROPY_LENS_JOBS_PER_GPU='{value}' is not a positive whole number"
    with pytest.raises(ValueError, match=message), claim_device("cuda"):
        pass
