"""Paths shared by the analysis tests: the package under analysis/ and its committed samples."""
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[3]
ANALYSIS_DIR = SOURCE_DIR / "analysis"
SAMPLES = ANALYSIS_DIR / "samples"
sys.path.insert(0, str(ANALYSIS_DIR))
