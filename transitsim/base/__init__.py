"""The ground every stage stands on: units, errors, atomic writes, human numbers, printing."""
