"""The README's two commands are the ones CI runs (so the documented command is tested)."""

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


def test_readme_cuda_kernel_on_the_cpu_example_runs(cache_dir, tmp_path):
    """The README's numba.cuda-on-the-CPU block, run as a script (it asserts its result)."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### numba.cuda kernels on the CPU")
    block = readme[readme.index("```python\n", start) + len("```python\n"):]
    block = block[: block.index("```")]
    script = tmp_path / "readme_example.py"  # a file: the translation reads the kernel's source
    script.write_text(block)
    exec(compile(block, str(script), "exec"), {"__name__": "__main__"})
