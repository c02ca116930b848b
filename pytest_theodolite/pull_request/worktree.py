"""The base revision of a pull request, checked out beside the working tree (``--theodolite-compare-ref``).

`RefWorktree` adds a detached ``git worktree`` of REF in a temporary directory and removes it again on exit,
also when the run fails or is interrupted (a worktree left behind would keep its branch's files on disk and
its entry in ``.git/worktrees``). Every problem -- no git, not a repository, an unknown REF, a shallow clone
that lacks it -- is one `CompareRefError` that says how to fix it, raised before anything is measured.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.core.errors import TheodoliteSetupError


class CompareRefError(TheodoliteSetupError):
    """REF cannot be checked out beside the working tree; the message says why and what to do."""


def _git(repo: Path, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise CompareRefError(
            "--theodolite-compare-ref needs git, which is not on PATH: install it"
        ) from None


def repository_root(path: Path) -> Path:
    """The top of the git working tree that holds `path`."""
    done = _git(path, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise CompareRefError(
            f"--theodolite-compare-ref compares with a git revision, but {path} is not inside a git "
            f"repository ({done.stderr.strip() or 'git rev-parse failed'}): run pytest in a clone"
        )
    return Path(done.stdout.strip())


def resolve_ref(repo: Path, ref: str) -> str:
    """REF's commit id; a clear error for a ref this clone does not have."""
    if not ref.strip() or ref.startswith("-"):
        raise CompareRefError(f"--theodolite-compare-ref: {ref!r} is not a git revision (e.g. origin/main)")
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode == 0:
        return done.stdout.strip()
    shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    hint = (
        "this clone is shallow and lacks it: fetch it (git fetch --unshallow, or git fetch origin "
        f"{ref.split('/', 1)[-1]}; in GitHub Actions, actions/checkout with fetch-depth: 0)"
        if shallow
        else f"fetch it first (e.g. git fetch origin {ref.split('/', 1)[-1]}) or name an existing branch, "
        "tag or commit"
    )
    raise CompareRefError(f"--theodolite-compare-ref: unknown revision {ref!r} in {repo}: {hint}")


@dataclass
class RefWorktree:
    """REF checked out (detached) in a temporary directory for as long as the context lasts."""

    repo: Path
    ref: str
    commit: str = field(default="", init=False)
    path: Path | None = field(default=None, init=False)
    _parent: Path | None = field(default=None, init=False, repr=False)

    def __enter__(self) -> RefWorktree:
        self.repo = repository_root(self.repo)
        self.commit = resolve_ref(self.repo, self.ref)
        self._parent = Path(tempfile.mkdtemp(prefix="theodolite-ref-"))
        path = self._parent / "tree"
        try:
            done = _git(self.repo, "worktree", "add", "--detach", str(path), self.commit)
            if done.returncode != 0:
                raise CompareRefError(
                    f"--theodolite-compare-ref: could not check {self.ref} ({self.commit[:12]}) out into a "
                    f"temporary worktree: {done.stderr.strip()}"
                )
            self.path = path
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        """Remove the worktree and its entry in the repository (idempotent)."""
        if self.path is not None:
            _git(self.repo, "worktree", "remove", "--force", str(self.path))
            self.path = None
        if self._parent is not None:
            shutil.rmtree(self._parent, ignore_errors=True)
            self._parent = None
            _git(self.repo, "worktree", "prune")  # the entry of a directory removed without git


def files_missing_at(repo: Path, commit: str, paths: list[Path]) -> list[Path]:
    """Which of `paths` (inside `repo`'s working tree) the commit does not have."""
    root = repository_root(repo).resolve()
    missing = []
    for path in paths:
        relative = path.resolve().relative_to(root).as_posix()
        if _git(root, "cat-file", "-e", f"{commit}:{relative}").returncode != 0:
            missing.append(path)
    return missing
