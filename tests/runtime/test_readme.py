"""The README's two commands are the ones CI runs, and its first screen is the user's.

Its code blocks run in tests/docs/test_code_blocks.py."""

from tests.support.layers import ROOT


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    line = ci[ci.index("# The README's test command, verbatim:") + 1]
    # a failing first suite must fail CI: set -e does not see a failure left of `&&`
    assert line.endswith(" || exit 1"), line
    test_command = line.removesuffix(" || exit 1")
    assert test_command.startswith("python -m pytest")
    assert f"```bash\n{test_command}\n```" in readme


def test_readme_install_command_installs_from_this_checkout():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test]" && kernelrt demo' in readme


def test_readme_opens_with_the_users_install_and_quick_start():
    """The first screen is the user's: install and quick start before results and contributing."""
    readme = (ROOT / "README.md").read_text()
    heads = [line for line in readme.splitlines() if line.startswith("## ")]
    assert heads[:2] == ["## Install", "## Quick start"], heads
    order = [readme.index(h) for h in ("## Install", "## Quick start", "## Inside MyoGen and SpectralBrain",
                                        "## Results", "## Contributing")]
    assert order == sorted(order)
    assert "```bash\npip install kernelrt\n```" in readme
