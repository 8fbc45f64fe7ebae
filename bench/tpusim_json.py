"""Runs a tpusim subcommand with --json and returns the parsed result (shared by the bench scripts)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TPUSIM = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "tpusim")


def run(subcommand, *args):
    out = subprocess.run([TPUSIM, subcommand, *map(str, args), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)
