"""Static reading of problems, candidates, batch layouts and the candidate scan (``ast`` only: no
problem or candidate code is executed here)."""
