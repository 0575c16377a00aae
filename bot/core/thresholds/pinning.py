"""Which history a gate of a pull request reads: what the base branch decides.

A shell script may name its own W&B project (``--project_name``, ``WANDB_PROJECT=``).  At the
head that name is written by the PR's author, who must not choose what the App reads with the
operator's credentials.  So a gate reads the source the *base* decides — its own at the
base, else its file's at the base, else the repository config's for that path — and a
different source named at the head is a ``SourceProposal``: shown in the review, requiring
a maintainer's approval, and read only once an approval covers it (docs/security.md).
The config is read at the base already, so only what a script names can move a source.

The Action (``bot.features.action``) reads the config and the history files at the base too;
a PR that changes one of them is shown as changing it (``changed_file``), and so is a gate
whose source it moves (``mark_proposals``): either requires action, in the App's words.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass

from bot.core.config import RepoConfig
from bot.core.globs import glob_match
from bot.core.models import (
    DeclaredSource,
    Gate,
    GateChange,
    GateReview,
    Review,
    SourceSpec,
    ThresholdFile,
)
from bot.core.thresholds.discover import resolve_source


@dataclass(frozen=True)
class SourceProposal:
    """A gate whose history source the PR changes; ``base`` is what it reads meanwhile."""

    gate: Gate  # at the head, with the source the PR names
    base: SourceSpec | None

    def describe(self) -> str:
        """What the review says about it (one sentence)."""
        named = self.gate.source.describe() if self.gate.source else "no source"
        was = f"the base reads {self.base.describe()}" if self.base else "the base names none"
        return (
            f"the PR names the history source {named} for this gate ({was}): "
            "it is not read until a maintainer approves"
        )


def _key(spec: SourceSpec | None) -> str:
    return spec.key() if spec is not None else ""


def base_source(
    change: GateChange, base_file: ThresholdFile | None, config: RepoConfig
) -> tuple[SourceSpec | None, DeclaredSource | None]:
    """The source the base decides for ``change``'s gate, and where it is named."""
    if change.base is not None:
        return change.base.source, change.base.declared
    if base_file is not None:
        return base_file.source, base_file.declared
    path = change.head.file
    decls = [(i, d) for i, d in enumerate(config.files) if glob_match(d.path, path)]
    return resolve_source(config, None, decls, None)


def pin_sources(
    changes: Sequence[GateChange],
    base_file: ThresholdFile | None,
    config: RepoConfig,
    approved: Container[str],
    key_of: Callable[[Gate], str],
) -> tuple[list[GateChange], list[SourceProposal]]:
    """``changes`` with each gate reading the source the base decides, and the proposals.

    A head gate whose source differs from the base's (its script names another project, or
    no longer names one) keeps it only when ``key_of(gate)`` is in ``approved`` (a
    maintainer's approval covers that gate with that source).
    """
    pinned: list[GateChange] = []
    proposals: list[SourceProposal] = []
    for change in changes:
        head = change.head
        spec, declared = base_source(change, base_file, config)
        if _key(spec) == _key(head.source) or key_of(head) in approved:
            pinned.append(change)
            continue
        proposals.append(SourceProposal(gate=head, base=spec))
        moved = head.model_copy(update={"source": spec, "declared": declared})
        pinned.append(change.model_copy(update={"head": moved}))
    return pinned, proposals


def mark_proposals(review: Review, proposals: Sequence[SourceProposal]) -> Review:
    """``review`` with each gate whose source the PR changes marked, requiring action."""
    if not proposals:
        return review
    by_gate = {(p.gate.file, p.gate.name, p.gate.metric, p.gate.op): p for p in proposals}

    def marked(gate: GateReview) -> GateReview:
        proposal = by_gate.get((gate.file, gate.name, gate.metric, gate.op))
        if proposal is None:
            return gate
        named = proposal.gate.source.describe() if proposal.gate.source else "none"
        update = {"proposed_source": named, "warnings": (*gate.warnings, proposal.describe())}
        return gate.model_copy(update=update)

    gates = tuple(marked(g) for g in review.gates)
    return review.model_copy(update={"gates": gates, "conclusion": "action_required"})


def changed_file(path: str, role: str) -> str:
    """What the review says of a file the PR changes and the review reads at the base
    instead (``role``: what the file is to the review, e.g. "the repository config")."""
    return (
        f"the PR changes {path} ({role}): this review reads it at the base, "
        "and the change takes effect only once merged; a maintainer must look"
    )
