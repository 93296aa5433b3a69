"""A schedule CSV written by PyTorch itself (torch.distributed.pipelining) is read by
`chimera schedule --from-csv`, verified, and gives the same per-rank action order; and the
single-placement schedules chimera writes (`--format torch-csv`, the V's included) pass
PyTorch's own checks of a compute-only schedule, the ones PyTorch's test_schedule.py applies to
its schedules: `_Action.from_str` on every cell, `_validate_schedule`, the lowering to sends and
receives (`_add_send_recv`, which asserts progress) and the dry run of the lowered schedule
(`_simulate_comms_compute`, which raises on a deadlock).

Usage: test_torch_csv_pytorch.py CHIMERA_BINARY WORK_DIR

PyTorch's functions come from CHIMERA_PYTORCH_SOURCE when it is set (a PyTorch checkout, a
directory holding torch/distributed/pipelining, or that directory itself; `scripts/pytorch-source
DIR` unpacks PyTorch 2.6's), loaded unmodified by pytorch_schedule_source.py even where the
installed torch is older; else from the installed torch. A checkout's own test artifacts
(test/distributed/pipelining/artifacts/*_compute.csv) are read by chimera too. Reading the CSVs
PyTorch's schedule classes write needs those classes, so it runs only with an installed torch
that has them.
Prints "SKIP: ..." and exits 0 when neither is there (ctest turns that line into a skip, never a
pass).
"""
import csv
import glob
import inspect
import json
import os
import re
import subprocess
import sys


def installed_schedules():
    """torch.distributed.pipelining.schedules of the installed torch, or None."""
    try:
        import torch  # noqa: F401
        from torch.distributed.pipelining import schedules
        from torch.distributed.pipelining.stage import _PipelineStageBase  # noqa: F401
    except ImportError as e:
        print(f"note: the installed torch has no torch.distributed.pipelining ({e})")
        return None
    return schedules


def pytorch_checks(installed):
    """(namespace with PyTorch's _Action, _validate_schedule, _add_send_recv and
    _simulate_comms_compute, where they come from), or (None, reason)."""
    source = os.environ.get("CHIMERA_PYTORCH_SOURCE")
    if source:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from pytorch_schedule_source import PyTorchSchedules

        try:
            loaded = PyTorchSchedules(source)
        except (OSError, ImportError, SyntaxError) as e:  # asked for, so a failure, not a skip
            print(f"FAIL: CHIMERA_PYTORCH_SOURCE={source}: {e}")
            sys.exit(1)
        stubbed = ", ".join(loaded.stubbed) or "none"
        print("executed from PyTorch's schedules.py:\n  " + "\n  ".join(loaded.statements))
        return loaded, (f"PyTorch {loaded.version or '(version unknown)'} source "
                        f"{loaded.path}, loaded unmodified; stand-ins: {stubbed}")
    if installed is None:
        return None, "neither a torch with torch.distributed.pipelining nor CHIMERA_PYTORCH_SOURCE"
    import torch

    missing = [n for n in ("_Action", "_validate_schedule") if not hasattr(installed, n)]
    if not missing and not hasattr(installed._Action, "from_str"):
        missing = ["_Action.from_str"]
    if missing:
        return None, f"the installed torch {torch.__version__} lacks {', '.join(missing)}"
    return installed, f"the installed torch {torch.__version__}"


def fake_stage_class():
    from torch.distributed.pipelining.stage import _PipelineStageBase

    class FakeStage(_PipelineStageBase):
        """Just what a multi-stage schedule's constructor reads to plan its pipeline_order."""

        def __init__(self, stage_index, num_stages, group_size, group_rank):
            self.submod = None
            self.stage_index = stage_index
            self.num_stages = num_stages
            self.group_size = group_size
            self.group_rank = group_rank
            self.group = None
            self.stage_index_to_group_rank = None

        def _create_grad_recv_info(self, *args, **kwargs):
            return None

        def _prepare_forward_infra(self, *args, **kwargs):
            pass

        def _prepare_backward_infra(self, *args, **kwargs):
            pass

    return FakeStage


def pytorch_csv(cls, ranks, stages_per_rank, micro_batches, path):
    """The schedule of rank 0's object: pipeline_order covers every rank."""
    num_stages = ranks * stages_per_rank
    fake_stage = fake_stage_class()
    stages = [fake_stage(r * ranks, num_stages, ranks, 0) for r in range(stages_per_rank)]
    sched = cls(stages, micro_batches, loss_fn=lambda a, b: a)
    dump = getattr(sched, "_dump_csv", None)
    if dump is not None and "format" in inspect.signature(dump).parameters:
        # _PipelineScheduleRuntime (the multi-stage schedules' base since torch 2.6) writes
        # compute and communication actions (0UNSHARD, 0SEND_F0, ...) unless asked for the
        # compute-only format that --from-csv reads.
        dump(path, format="compute_only")
    elif dump is not None:  # PipelineScheduleMulti: compute-only is the one format it writes
        dump(path)
    else:  # the documented format: one row per rank, str() of each action, None as ""
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            for rank in sorted(sched.pipeline_order):
                writer.writerow(sched.pipeline_order[rank])
    return {
        rank: [str(a) for a in sched.pipeline_order[rank] if a is not None]
        for rank in sorted(sched.pipeline_order)
    }


# chimera's single-placement schemes, written as torch CSV and handed to PyTorch's checks: each
# at D = 2, 4, 8 with N = D and 2D (dualpipev needs N >= 2D: 2D and 4D), and odd points for the
# V's.
SINGLE_PLACEMENT = ("gpipe", "1f1b", "zb-h1", "interleaved", "zb-v", "dualpipev", "v-half",
                    "v-min")
EXPORTED = tuple((scheme, d, n * (2 if scheme == "dualpipev" else 1))
                 for scheme in SINGLE_PLACEMENT for d in (2, 4, 8) for n in (d, 2 * d)) + (
    ("v-half", 3, 7), ("v-min", 3, 7), ("v-half", 5, 9), ("v-min", 6, 12))


def check_with_pytorch(pt, path, ranks, micro_batches):
    """Runs PyTorch's checks on the CSV at path, as PyTorch's _load_csv reads it; raises where
    PyTorch rejects it. Returns (stages, steps of PyTorch's dry run)."""
    with open(path, newline="") as f:
        actions = {rank: [pt._Action.from_str(s) for s in row]
                   for rank, row in enumerate(csv.reader(f))}
    stages = 1 + max(a.stage_index for row in actions.values() for a in row if a is not None)
    mapping = pt._validate_schedule(actions, ranks, stages, micro_batches)
    if not isinstance(mapping, dict):
        # PyTorch 2.6's validator returns nothing; newer ones return the stage -> rank map they
        # infer (rejecting a stage on two ranks). Here the map is read from the rows alike.
        mapping = {}
        for rank, row in actions.items():
            for a in row:
                if a is not None and mapping.setdefault(a.stage_index, rank) != rank:
                    raise AssertionError(f"stage {a.stage_index} on ranks "
                                         f"{mapping[a.stage_index]} and {rank}")
    lower = getattr(pt, "_add_send_recv", None)
    simulate = getattr(pt, "_simulate_comms_compute", None)
    if lower is None or simulate is None:  # before PyTorch 2.5's schedule runtime
        return stages, None
    # _add_send_recv consumes its input; its progress assertion is PyTorch's deadlock check
    lowered = lower({rank: list(row) for rank, row in actions.items()}, lambda s: mapping[s],
                    stages)
    simulated = simulate(lowered, lambda s: mapping[s], stages)
    return stages, max(len(steps) for steps in simulated.values())


def export(chimera, work, scheme, ranks, n):
    """Path of chimera's torch CSV for the scheme, or None (after a FAIL line)."""
    run = subprocess.run([chimera, "schedule", "--scheme", scheme, "-D", str(ranks), "-N",
                          str(n), "--format", "torch-csv"], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL: {scheme} D={ranks} N={n}: chimera exit {run.returncode}: {run.stderr}")
        return None
    path = os.path.join(work, f"chimera_{scheme}_{ranks}_{n}.csv")
    with open(path, "w", newline="") as f:
        f.write(run.stdout)
    return path


def checks_are_live(pt, chimera, work):
    """PyTorch's checks, as loaded, reject a schedule with a backward before its forward and one
    that deadlocks: 0 when both are rejected, else 1."""
    path = export(chimera, work, "1f1b", 2, 3)
    if path is None:
        return 1
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    rows[1][0], rows[1][1] = rows[1][1], rows[1][0]  # rank 1: 1B0 before 1F0
    broken = {"backward before forward": rows,
              "deadlock": [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]}
    if getattr(pt, "_add_send_recv", None) is None or getattr(pt, "_simulate_comms_compute",
                                                               None) is None:
        del broken["deadlock"]  # only the lowering and the dry run see a deadlock
    for what, rows in broken.items():
        bad = os.path.join(work, f"broken_{what.replace(' ', '_')}.csv")
        with open(bad, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        try:
            check_with_pytorch(pt, bad, 2, 2 if what == "deadlock" else 3)
        except Exception as e:  # PyTorch reports a broken schedule by assertion or error
            print(f"ok: PyTorch's checks reject a {what} ({type(e).__name__})")
            continue
        print(f"FAIL: PyTorch's checks, as loaded, accept a {what}: {bad}")
        return 1
    return 0


def validate_exported(pt, chimera, work):
    """1 on the first schedule PyTorch rejects, else 0."""
    if checks_are_live(pt, chimera, work) != 0:
        return 1
    for scheme, ranks, n in EXPORTED:
        path = export(chimera, work, scheme, ranks, n)
        if path is None:
            return 1
        try:
            stages, steps = check_with_pytorch(pt, path, ranks, n)
        except Exception as e:  # PyTorch reports a broken schedule by assertion or error
            print(f"FAIL: PyTorch rejects chimera's {scheme} D={ranks} N={n} ({path}): {e!r}")
            return 1
        dry_run = "no lowering in this PyTorch" if steps is None else f"dry run: {steps} steps"
        print(f"ok: PyTorch validates chimera's {scheme} ranks={ranks} stages={stages} N={n}"
              f" ({dry_run})")
    return 0


def chimera_reads(chimera, path):
    """{rank: action strings} as `chimera schedule --from-csv` reads the CSV at path, and its
    stage count; None (after a FAIL line) when chimera refuses it."""
    run = subprocess.run([chimera, "schedule", "--from-csv", path, "--format", "json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL: {path}: chimera exit {run.returncode}: {run.stderr}")
        return None
    got = json.loads(run.stdout)
    return {rank: [f"{op['stage']}{op['op']}{m}" for op in ops for m in op["mbs"]]
            for rank, ops in enumerate(got["workers"])}, got["stages"]


def read_pytorch_csvs(schedules, chimera, work):
    """chimera reads the CSVs PyTorch's schedule classes write: 1 on a mismatch, else 0."""
    cases = [(name, getattr(schedules, name)) for name in
             ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS")
             if hasattr(schedules, name)]
    if not cases:
        print("note: this torch has none of the multi-stage schedules the test uses")
        return 0
    for name, cls in cases:
        for ranks, per_rank, n in ((2, 2, 4), (4, 2, 8)):
            path = os.path.join(work, f"{name}_{ranks}x{per_rank}_{n}.csv")
            expected = pytorch_csv(cls, ranks, per_rank, n, path)
            read = chimera_reads(chimera, path)
            if read is None:
                return 1
            if read != (expected, ranks * per_rank):
                print(f"FAIL: {name} {path}: chimera read\n{read}\nPyTorch wrote\n{expected}")
                return 1
            print(f"ok: {name} ranks={ranks} stages={ranks * per_rank} N={n}")
    return 0


def read_pytorch_artifacts(pt, chimera):
    """chimera reads the compute-only CSVs in the PyTorch checkout's own tests
    (test/distributed/pipelining/artifacts/*_compute.csv) in the order PyTorch's _Action.from_str
    parses them, and PyTorch's checks pass them: 1 on a mismatch, else 0."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(pt.path))))
    folder = os.path.join(root, "test", "distributed", "pipelining", "artifacts")
    paths = sorted(glob.glob(os.path.join(folder, "*_compute.csv")))
    if not paths:
        print(f"note: no PyTorch test artifacts (*_compute.csv) under {folder}: not read")
        return 0
    for path in paths:
        with open(path, newline="") as f:
            parsed = {rank: [str(a) for a in map(pt._Action.from_str, row) if a is not None]
                      for rank, row in enumerate(csv.reader(f))}
        stages = 1 + max(int(re.match(r"\d+", a).group()) for row in parsed.values() for a in row)
        micro_batches = 1 + max(int(re.search(r"\d+$", a).group())
                                for row in parsed.values() for a in row)
        read = chimera_reads(chimera, path)
        if read is None:
            return 1
        if read != (parsed, stages):
            print(f"FAIL: {path}: chimera read\n{read}\nPyTorch parses\n{parsed}")
            return 1
        try:
            check_with_pytorch(pt, path, len(parsed), micro_batches)
        except Exception as e:  # PyTorch's own artifact must pass its own checks as loaded here
            print(f"FAIL: PyTorch's checks, as loaded, reject PyTorch's own {path}: {e!r}")
            return 1
        print(f"ok: chimera reads PyTorch's test artifact {os.path.basename(path)} as PyTorch "
              f"parses it (ranks={len(parsed)} stages={stages} N={micro_batches}), and PyTorch's "
              "checks pass it")
    return 0


def main():
    chimera, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    installed = installed_schedules()
    pt, origin = pytorch_checks(installed)
    if pt is None and installed is None:
        print(f"SKIP: {origin}: PyTorch's schedule checks cannot run here")
        return 0
    if pt is None:
        print(f"note: {origin}: chimera's CSVs are not validated")
    else:
        print(f"PyTorch's schedule checks from {origin}")
        if validate_exported(pt, chimera, work) != 0:
            return 1
        if getattr(pt, "path", None) and read_pytorch_artifacts(pt, chimera) != 0:
            return 1
    if installed is None:
        print("note: reading PyTorch-written CSVs needs PyTorch's schedule classes (an installed "
              "torch with torch.distributed.pipelining): not run")
        return 0
    return read_pytorch_csvs(installed, chimera, work)


if __name__ == "__main__":
    sys.exit(main())
