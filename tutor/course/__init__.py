"""The course as data and the learner's path through it: the lesson model and its YAML loader
(with line numbers for every error), the catalog, the `LessonSession` that judges and records
each step, review, the progress store and the design ledger. No Textual, no torch."""
