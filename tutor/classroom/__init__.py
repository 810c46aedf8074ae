"""The classroom: result bundles a learner submits, and the class report an instructor reads."""
