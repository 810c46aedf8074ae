"""The learner's screen (Textual): the App, its screens and the step widgets. Runs in the UI
process and never imports torch; widgets render what a `tutor.course.session.LessonSession`
decides, and runs reach the engine through `runner.py`."""
