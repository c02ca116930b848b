"""REF checked out beside the working tree: clear errors before anything runs, nothing left afterwards."""

import subprocess
from pathlib import Path

import pytest

from pytest_theodolite.pull_request.worktree import CompareRefError, RefWorktree, resolve_ref


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository with two commits whose job module differs: v1 then v2."""
    path = tmp_path / "repo"
    (path / "spark_jobs").mkdir(parents=True)
    git(path.parent, "init", "-q", str(path))
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    for version in ("v1", "v2"):
        (path / "spark_jobs" / "job.py").write_text(f"VERSION = {version!r}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", version)
    return path


def worktrees(repo: Path) -> list[str]:
    return [
        line
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree")
    ]


def test_the_ref_is_checked_out_detached_and_removed_on_exit(repo):
    with RefWorktree(repo, "HEAD~1") as tree:
        assert tree.path is not None and tree.path.is_dir()
        assert (tree.path / "spark_jobs" / "job.py").read_text() == "VERSION = 'v1'\n"
        assert tree.commit == git(repo, "rev-parse", "HEAD~1")
        assert len(worktrees(repo)) == 2
        made = tree.path
    assert not made.exists() and not made.parent.exists()
    assert len(worktrees(repo)) == 1
    assert (repo / "spark_jobs" / "job.py").read_text() == "VERSION = 'v2'\n"  # the working tree untouched


def test_the_worktree_is_removed_when_the_run_fails_or_is_interrupted(repo):
    for error in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(error)), RefWorktree(repo, "HEAD") as tree:
            made = tree.path
            raise error
        assert not made.exists()
        assert len(worktrees(repo)) == 1


def test_a_subdirectory_of_the_repository_finds_its_root(repo):
    with RefWorktree(repo / "spark_jobs", "HEAD") as tree:
        assert tree.repo == repo.resolve() or tree.repo == repo


def test_an_unknown_ref_says_how_to_fetch_it(repo):
    with pytest.raises(CompareRefError, match=r"unknown revision 'origin/nope'.*git fetch origin nope"):
        resolve_ref(repo, "origin/nope")


@pytest.mark.parametrize("ref", ["", "--all"])
def test_a_ref_that_is_not_a_revision_is_refused(repo, ref):
    with pytest.raises(CompareRefError, match="is not a git revision"):
        resolve_ref(repo, ref)


def test_a_shallow_clone_that_lacks_the_ref_says_how_to_unshallow(repo, tmp_path):
    first = git(repo, "rev-parse", "HEAD~1")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(CompareRefError, match=r"shallow.*fetch-depth: 0"):
        resolve_ref(shallow, first)


def test_outside_a_repository_is_one_clear_error(tmp_path):
    with pytest.raises(CompareRefError, match="not inside a git repository"):
        RefWorktree(tmp_path, "HEAD").__enter__()
