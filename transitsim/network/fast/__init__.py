"""Fast paths: the DES's timings by closed recurrences, max-plus forms and processor sharing."""
