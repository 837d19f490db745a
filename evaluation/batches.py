"""Cases scored together in one task, for suites whose cases are small files (nnU-Net's label
maps, picai_eval's detection maps): a worker's start and the truth's settings are paid once for
many cases, and a batch whose cases cannot be used fails with one message naming each of them,
so that the participant sees every problem of an upload at once, not one per attempt."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from evaluation.errors import SubmissionError

Found = TypeVar("Found")
SHOWN_PROBLEMS = 4  # how many of a batch's problems its message names


@dataclass(frozen=True)
class Case:
    """One case of a batch: its truth file, its prediction (None: scored as an empty
    prediction, ``missing_cases: empty``) and the prediction's name as the participant sees it."""

    case: str
    truth: str
    pred: str | None
    display: str | None


class Batch(Protocol):
    cases: tuple[Case, ...]


def every_case(batch: Batch, function: Callable[[Any, Case], Found]) -> dict[str, Found]:
    """``function(batch, case)`` of every case of ``batch``; if some cannot be used (the
    participant's fault), the batch fails with one message naming each of them."""
    results, problems = {}, []
    for item in batch.cases:
        try:
            results[item.case] = function(batch, item)
        except SubmissionError as exc:
            problems.append(str(exc))
    if problems:
        rest = problems[1:SHOWN_PROBLEMS]
        more = f" (and {len(problems) - 1} more: {'; '.join(rest)}{' ...' if len(problems) > SHOWN_PROBLEMS else ''})"
        raise SubmissionError(problems[0] + (more if len(problems) > 1 else ""))
    return results
