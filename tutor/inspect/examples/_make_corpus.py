"""Writes corpus.txt, the text char_gpt.py trains on: the prose of the tutor's own lessons (every
step's body and prompt, in lesson order), so the package ships a text it has every right to.
Run it again after the lessons change: python tutor/inspect/examples/_make_corpus.py"""

from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
LESSONS = HERE.parents[2] / "lessons"


def main() -> None:
    lessons = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(LESSONS.glob("*.yaml"))]
    parts = []
    for lesson in sorted(lessons, key=lambda lesson: lesson.get("order", 0)):
        parts.append(f"# {lesson['title']}\n")
        for step in lesson["steps"]:
            for key in ("title", "body", "prompt"):
                text = step.get(key)
                if isinstance(text, str) and text.strip():
                    parts.append(text.strip() + "\n")
    (HERE / "corpus.txt").write_text("\n".join(parts), encoding="utf-8")


if __name__ == "__main__":
    main()
