"""The README's two commands are the ones CI runs (so the documented command is tested)."""

from tests.support.layers import ROOT


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    test_command = ci[ci.index("# The README's test command, verbatim:") + 1]
    assert test_command.startswith("python -m pytest")
    assert f"```bash\n{test_command}\n```" in readme


def test_readme_install_command_installs_from_this_checkout():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test]" && kernelrt demo' in readme
