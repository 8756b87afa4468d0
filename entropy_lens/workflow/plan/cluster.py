"""What the jobs ask the scheduler for: one job's cluster request (``runtime`` minutes: the estimate x
safety x attempt; ``mem_mb``: the predicted peak x memory margin x attempt; with floors), and the
:class:`Plan` of every job, which hands a rule's ``resources:`` to Snakemake and tabulates requests per job
and per model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from entropy_lens.workflow.plan.cost import RULES, Job, JobPlan, plan_job
from entropy_lens.workflow.plan.settings import MIB, PlanSettings, RunSettings


@dataclass(frozen=True)
class ClusterRequest:
    """What a job asks the scheduler for."""

    runtime: int
    mem_mb: int


def cluster_request(job: JobPlan, settings: PlanSettings, attempt: int = 1) -> ClusterRequest:
    """``runtime`` (minutes: estimate x ``safety`` x attempt) and ``mem_mb`` (predicted peak x
    ``mem_margin`` x attempt) for a job, with floors.

    ``attempt`` is Snakemake's retry counter, so a retried job asks for more.
    """
    if not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be a positive integer, got {attempt!r}")
    runtime = max(settings.min_runtime_min, math.ceil(job.est_s * settings.safety * attempt / 60))
    mem_mb = max(settings.min_mem_mb, math.ceil(job.host_peak_bytes * settings.mem_margin * attempt / MIB))
    return ClusterRequest(runtime=int(runtime), mem_mb=int(mem_mb))


@dataclass(frozen=True)
class Plan:
    """Every planned job, with the settings it was planned under.

    Attributes:
        jobs: One :class:`JobPlan` per job, in config order.
        settings: Rates, safety and floors.
        run: Device, dtype and lens budget.
    """

    jobs: tuple[JobPlan, ...]
    settings: PlanSettings
    run: RunSettings

    def job(self, rule: str, model: str, dataset: str = "", shard: int = 0) -> JobPlan:
        """The plan of one job.

        Raises:
            ValueError: naming the job when it is not in the plan.
        """
        for job in self.jobs:
            if job.key == (rule, model, dataset, int(shard)):
                return job
        known = sorted({(j.rule, j.model) for j in self.jobs})
        raise ValueError(f"no planned job {rule}/{model}/{dataset or '-'}/shard {shard}; planned: {known}")

    def request(self, rule: str, model: str, dataset: str = "", shard: int = 0, *, attempt: int = 1) -> ClusterRequest:
        """The cluster request of one job (see :func:`cluster_request`)."""
        return cluster_request(self.job(rule, model, dataset, shard), self.settings, attempt)

    def resources(self, rule: str) -> dict[str, Callable]:
        """``runtime`` and ``mem_mb`` callables for a rule's ``resources:``.

        Each takes ``(wildcards, attempt)`` and reads ``model`` and, where the rule has
        them, ``dataset`` and ``shard`` from the wildcards, e.g. in ``rules/common.smk``
        ``EXTRACT_RESOURCES = PLAN.resources("extract_profiles")`` and in the rule
        ``runtime=EXTRACT_RESOURCES["runtime"], mem_mb=EXTRACT_RESOURCES["mem_mb"]``.
        """
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")

        def lookup(wildcards, attempt: int) -> ClusterRequest:
            dataset, kind = getattr(wildcards, "dataset", ""), getattr(wildcards, "kind", "")
            # fit_lens: the kind; extract_lens_profiles: "{kind}/{dataset}"
            dataset = f"{kind}/{dataset}" if kind and dataset else dataset or kind
            shard = int(getattr(wildcards, "shard", 0))
            return self.request(rule, wildcards.model, dataset, shard, attempt=attempt)

        return {
            "runtime": lambda wildcards, attempt=1: lookup(wildcards, attempt).runtime,
            "mem_mb": lambda wildcards, attempt=1: lookup(wildcards, attempt).mem_mb,
        }

    def table(self) -> pd.DataFrame:
        """One row per job: the plan's fields, ``est_s`` and the cluster request."""
        rows = []
        for job in self.jobs:
            request = cluster_request(job, self.settings)
            rows.append(
                {
                    **dataclasses.asdict(job),
                    "est_s": job.est_s,
                    "runtime_min": request.runtime,
                    "mem_mb": request.mem_mb,
                }
            )
        return pd.DataFrame(rows)

    def totals(self) -> pd.DataFrame:
        """Per model, then ``"all"``: jobs, FLOPs, estimated and requested time, largest requests."""
        table = self.table()
        agg = {
            "rule": "size",
            "forward_flops": "sum",
            "lens_flops": "sum",
            "est_s": "sum",
            "runtime_min": "sum",
            "mem_mb": "max",
            "device_peak_bytes": "max",
        }
        per_model = table.groupby("model", sort=False).agg(agg)
        overall = table.agg(agg).to_frame("all").T
        return pd.concat([per_model, overall]).rename(columns={"rule": "jobs"})


def plan_jobs(jobs: Sequence[Job], run: RunSettings, settings: PlanSettings | None = None) -> Plan:
    """Plan every job.

    Args:
        jobs: The jobs, e.g. from :func:`jobs_from_config`.
        run: Device, dtype and lens budget.
        settings: Rates and requests; default :class:`PlanSettings`.
    """
    settings = settings or PlanSettings()
    return Plan(tuple(plan_job(job, run, settings) for job in jobs), settings, run)
