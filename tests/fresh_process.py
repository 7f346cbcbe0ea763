"""Run Python code in a fresh process where hf_longdoc cannot be imported: what a Hub user without the package has."""

import os
import subprocess
import sys
import textwrap

HIDE_HF_LONGDOC = textwrap.dedent(
    """
    import sys
    class BlockHfLongdoc:
        def find_spec(self, name, path=None, target=None):
            if name == "hf_longdoc" or name.startswith("hf_longdoc."):
                raise ModuleNotFoundError("hf_longdoc is hidden in this process")
    sys.meta_path.insert(0, BlockHfLongdoc())
    sys.path = [p for p in sys.path if not p.rstrip("/").endswith("src")]
    try:
        import hf_longdoc
        raise SystemExit("hf_longdoc should not be importable here")
    except ModuleNotFoundError:
        pass
    """
)


def run_without_hf_longdoc(code, *args, workdir, timeout=300):
    """Run `code` (with `sys.argv[1:]` = `args`) in a new interpreter that cannot import hf_longdoc, with its own
    remote-code cache under `workdir` and the Hub offline; fails the test with the child's stderr if it fails."""
    script = os.path.join(workdir, "without_hf_longdoc.py")
    with open(script, "w") as f:
        f.write(HIDE_HF_LONGDOC + textwrap.dedent(code))
    env = dict(os.environ, HF_MODULES_CACHE=os.path.join(workdir, "modules"), HF_HUB_OFFLINE="1", PYTHONPATH="")
    result = subprocess.run([sys.executable, script, *map(str, args)], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
