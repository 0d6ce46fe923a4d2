"""The reference kernel of drift.py, timed: by calibrate between its probe groups (reference_timer),
and again by `roofline check` (check_now) and `roofline profile` (moved_note) to say when the
machine moved since calibrating. torch is imported only when a timer is made.
"""

from __future__ import annotations

from typing import Callable

from roofline.measure.drift import ReferenceCheck, ReferenceRun, compare, load_average


def reference_timer(device: str, n: int, sync=None, budget_s: float = 0.05) -> Callable[[], float]:
    """A function timing the reference (an fp32 (n, n) @ (n, n) matmul on ``device``, its operands
    made once) for about ``budget_s`` and returning its median seconds. Needs torch."""
    import torch

    from roofline.measure.timing import bench

    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    c = torch.empty(n, n, device=device)
    return lambda: bench(lambda: torch.matmul(a, b, out=c), sync=sync, budget_s=budget_s, max_repeats=200).median_s


def check_now(run: ReferenceRun | None, device: str, sync=None) -> ReferenceCheck | None:
    """The reference timed again on ``device`` (with torch's threads as they are now) against the
    calibration's; None for a profile written before the reference existed."""
    if run is None:
        return None
    return compare(run, reference_timer(device, run.n, sync, budget_s=0.1)(), load_average())


def moved_note(calibration) -> str | None:
    """For `roofline profile` given a calibrated profile: the reference timed again here, and a note
    when the machine moved beyond the bound since calibrating. None when there is nothing to compare
    (a profile without a reference, no torch, or a profile of another device than this machine's,
    as when a trace is read away from the machine that recorded it)."""
    if calibration is None or calibration.reference is None:
        return None
    try:
        import torch
    except ImportError:
        return None
    from roofline.measure.device import device_info, synchronizer

    device = calibration.device
    if (device == "cuda" and not torch.cuda.is_available()) or device_info(device).name != calibration.device_name:
        return None
    threads = torch.get_num_threads()
    torch.set_num_threads(calibration.threads)
    try:
        moved = check_now(calibration.reference, device, synchronizer(device))
    finally:
        torch.set_num_threads(threads)
    return moved.text() if moved.moved else None
