import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # usecases.py, shared by the gates and the scripts
# spark_jobs/ from this checkout: in pull-request mode each revision's gates import their own (installed, the jobs
# are `theodolite_spark_jobs`, one version for both sides)
sys.path.insert(0, str(Path(__file__).parents[1]))
