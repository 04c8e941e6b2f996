import sys
from pathlib import Path

# tests/ holds shared helpers (fixture_support) imported by test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
