"""Device claiming for extraction jobs (the CUDA path needs a GPU; its refusal does not)."""

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
