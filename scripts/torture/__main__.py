"""python3 -m torture (from scripts/): the same as python3 scripts/torture.py."""
from .main import main

main()
