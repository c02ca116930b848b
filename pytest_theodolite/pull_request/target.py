"""What a pull-request run compares the working tree with: REF's name, its commit and the two trees the jobs
are imported from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.engine.benchmark import Benchmark
from pytest_theodolite.pull_request.paired import CHANGE, REF
from pytest_theodolite.pull_request.side_spec import job_reference, side_roots
from pytest_theodolite.pull_request.worktree import RefWorktree


@dataclass(frozen=True)
class CompareTarget:
    """What the change is compared with: REF's name, its commit and the two trees the jobs come from."""

    ref: str
    commit: str
    ref_root: Path  # REF's temporary worktree
    change_root: Path  # the working tree (pytest's rootdir)
    repo_root: Path | None = None  # the repository's top level (REF's worktree is a checkout of it)

    @property
    def label(self) -> str:
        """'REF origin/main (3f893a9)' for headers; 'REF 3f893a9' where REF was given as a commit id."""
        if self.commit.startswith(self.ref.lower()):
            return f"REF {self.commit[:7]}"
        return f"REF {self.ref} ({self.commit[:7]})"

    @classmethod
    def of(cls, worktree: RefWorktree, change_root: Path) -> CompareTarget:
        assert worktree.path is not None  # entered
        return cls(worktree.ref, worktree.commit, worktree.path, change_root, worktree.repo)

    def job_roots(self, benchmark: Benchmark) -> dict[str, Path]:
        """Where each side imports `benchmark`'s job from (side_spec.side_roots): a ``src/`` layout or a rootdir
        in a subfolder is found at the same place in REF's worktree."""
        module, _ = job_reference(benchmark)
        ref, change = side_roots(module, self.repo_root or self.change_root, self.ref_root, self.change_root)
        return {REF: ref, CHANGE: change}
