"""A schedule CSV written by PyTorch itself (torch.distributed.pipelining) is read by
`chimera schedule --from-csv`, verified, and gives the same per-rank action order; and the
single-placement schedules chimera writes (`--format torch-csv`, the V's included) pass
PyTorch's own validation of a schedule (`_validate_schedule`, where this torch has it).

Usage: test_torch_csv_pytorch.py CHIMERA_BINARY WORK_DIR
Prints "SKIP: ..." and exits 0 when this torch has no torch.distributed.pipelining (ctest turns
that line into a skip, never a pass).
"""
import csv
import inspect
import json
import os
import subprocess
import sys

try:
    import torch  # noqa: F401
    from torch.distributed.pipelining import schedules
    from torch.distributed.pipelining.stage import _PipelineStageBase
except ImportError as e:
    print(f"SKIP: torch.distributed.pipelining is not available here ({e})")
    sys.exit(0)


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


def pytorch_csv(cls, ranks, stages_per_rank, micro_batches, path):
    """The schedule of rank 0's object: pipeline_order covers every rank."""
    num_stages = ranks * stages_per_rank
    stages = [FakeStage(r * ranks, num_stages, ranks, 0) for r in range(stages_per_rank)]
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


# chimera's single-placement schemes, written as torch CSV and handed to PyTorch's validator.
EXPORTED = (("1f1b", 4, 8), ("zb-h1", 4, 8), ("interleaved", 4, 8), ("zb-v", 4, 8),
            ("v-half", 4, 8), ("v-min", 4, 8), ("v-half", 3, 7), ("v-min", 3, 7))


def validate_exported(chimera, work):
    """1 on the first schedule PyTorch rejects, else 0; a note when this torch cannot check."""
    validate = getattr(schedules, "_validate_schedule", None)
    action = getattr(schedules, "_Action", None)
    if validate is None or not hasattr(action, "from_str"):
        print("note: this torch has no _validate_schedule: chimera's CSVs are not validated")
        return 0
    for scheme, ranks, n in EXPORTED:
        run = subprocess.run([chimera, "schedule", "--scheme", scheme, "-D", str(ranks), "-N",
                              str(n), "--format", "torch-csv"], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: {scheme} D={ranks} N={n}: chimera exit {run.returncode}: {run.stderr}")
            return 1
        path = os.path.join(work, f"chimera_{scheme}_{ranks}_{n}.csv")
        with open(path, "w", newline="") as f:
            f.write(run.stdout)
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        actions = {rank: [action.from_str(cell) for cell in row if cell]
                   for rank, row in enumerate(rows)}
        stages = 1 + max(a.stage_index for row in actions.values() for a in row)
        try:
            validate(actions, ranks, stages, n)
        except Exception as e:  # PyTorch reports a broken schedule by assertion or error
            print(f"FAIL: PyTorch rejects chimera's {scheme} D={ranks} N={n} ({path}): {e!r}")
            return 1
        print(f"ok: PyTorch validates chimera's {scheme} ranks={ranks} stages={stages} N={n}")
    return 0


def main():
    chimera, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    if validate_exported(chimera, work) != 0:
        return 1
    cases = [(name, getattr(schedules, name)) for name in
             ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS")
             if hasattr(schedules, name)]
    if not cases:
        print("SKIP: this torch has none of the multi-stage schedules the test uses")
        return 0
    letters = {"F": "F", "B": "B", "I": "I", "W": "W"}
    for name, cls in cases:
        for ranks, per_rank, n in ((2, 2, 4), (4, 2, 8)):
            path = os.path.join(work, f"{name}_{ranks}x{per_rank}_{n}.csv")
            expected = pytorch_csv(cls, ranks, per_rank, n, path)
            run = subprocess.run([chimera, "schedule", "--from-csv", path, "--format", "json"],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL: {name} {path}: chimera exit {run.returncode}: {run.stderr}")
                return 1
            got = json.loads(run.stdout)
            actions = {
                rank: [f"{op['stage']}{letters[op['op']]}{m}" for op in ops for m in op["mbs"]]
                for rank, ops in enumerate(got["workers"])
            }
            if actions != expected or got["stages"] != ranks * per_rank:
                print(f"FAIL: {name} {path}: chimera read\n{actions}\nPyTorch wrote\n{expected}")
                return 1
            print(f"ok: {name} ranks={ranks} stages={ranks * per_rank} N={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
