"""For instructors: `gpututor lesson test` (play every step of a lesson headlessly) and the
template `gpututor new` writes. Lint and the schema live with the lesson model (tutor.course.lesson)."""
