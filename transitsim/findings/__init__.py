"""This project's runs beside the published results, claim by claim (`transitsim findings`)."""
