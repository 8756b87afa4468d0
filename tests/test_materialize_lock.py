"""Processes sharing one model cache materialize a registry model once: the others wait and read that copy."""

from __future__ import annotations

import threading
import time

from entropy_lens.model import loading


def test_concurrent_loads_materialize_once_and_never_see_a_half_copy(tmp_path, monkeypatch):
    calls, seen = [], []

    def slow_materialize(name, folder):
        calls.append(name)
        time.sleep(0.3)  # a second caller arriving now must wait, not start its own copy
        folder.mkdir(parents=True)
        (folder / loading.SOURCE_FILE).write_text("{}")

    monkeypatch.setattr(loading, "materialize_model", slow_materialize)
    folder = tmp_path / "cache" / "tiny"

    def load():
        loading._materialize_once("tiny", folder)
        seen.append((folder / loading.SOURCE_FILE).exists())

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["tiny"] and seen == [True, True, True]
