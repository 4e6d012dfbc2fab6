"""Streamed rendering: a text spoken piece by piece, each piece handed out as soon as it is ready.

    summary = render.stream(engine, request, on_piece=lambda p: play(p.audio), on_step=bar)

    with run.StreamRun(engine, request) as streamed:   # the same, generated in a worker thread
        for piece in streamed:                           # StreamPiece, strictly in order
            out.write(piece.audio)

The modules, each name imported from the one that defines it:
- `cut`: the text cut at its pause tags, then at sentence boundaries (`cut_segments`,
  `cut_request`, `StreamConfig`): the first piece short (whole sentences up to `first_seconds`, or
  clauses of a longer first sentence), the later ones whole sentences up to `piece_seconds` (one
  sentence each by default, so that a reply's sentences leave one by one), a later sentence over
  that kept whole up to `sentence_seconds`. A pause is a segment of its exact silence. Torch-free:
  the server and Wyoming cut with it too.
- `waves`: how many pieces run at once after piece 0, from the measured speed: `WavePlanner` (the
  waves of `say --stream`: as large as can be generated before the audio handed out has played;
  when even one piece cannot be, the device is slower than real time and waves double). A wave's
  pieces join staggered by the engine's one admission (engine/model/admission.py).
- `render`: the render itself (`stream`, `StreamedPieces`, which the service runs too): the pieces
  run by the engine's one piece policy (pieces.py), as Engine.generate's do; without a reference
  voice, piece 0 is generated first and its codes and text are the voice of every later piece;
  piece k uses seed + k; every piece is decoded and post-processed on its own exactly as a whole
  request of its text, so a text of one piece renders exactly as Engine.generate renders it.
- `run`: `StreamRun`, `stream` in a worker thread.
"""
