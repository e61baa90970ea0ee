#!/usr/bin/env python3
"""Turns a terminal capture with colours (`tmux capture-pane -p -e`) into an SVG.

Used to make assets/control-room.svg from the fleet demo:

    tmux new-session -d -s demo -x 120 -y 40 "clowder demo"
    tmux capture-pane -t demo -p -e > shot.ansi
    python3 tools/ansi2svg.py shot.ansi 120 40 > assets/control-room.svg

Only what a capture holds is understood: SGR colours (16, 256, true colour), bold,
dim, italic, underline and reverse. Each run of cells is placed at its column, so the
picture keeps the grid whatever font the viewer picks.
"""

import re
import sys
import unicodedata
from html import escape

CELL_W, CELL_H = 8.4, 17
BG, FG = "#1d1f21", "#d0d0d0"
BASE16 = [
    "#1d1f21", "#cc6666", "#b5bd68", "#f0c674", "#81a2be", "#b294bb", "#8abeb7", "#c5c8c6",
    "#666666", "#d54e53", "#b9ca4a", "#e7c547", "#7aa6da", "#c397d8", "#70c0b1", "#eaeaea",
]


def color256(n):
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    level = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (level, level, level)


def apply_sgr(params, style):
    codes = [int(p) if p else 0 for p in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            style.clear()
        elif c in (1, 2, 3, 4, 7):
            style[{1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}[c]] = True
        elif c == 22:
            style.pop("bold", None)
            style.pop("dim", None)
        elif c in (23, 24, 27):
            style.pop({23: "italic", 24: "underline", 27: "reverse"}[c], None)
        elif 30 <= c <= 37 or 90 <= c <= 97:
            style["fg"] = BASE16[c - 30 if c < 90 else c - 82]
        elif 40 <= c <= 47 or 100 <= c <= 107:
            style["bg"] = BASE16[c - 40 if c < 100 else c - 92]
        elif c in (39, 49):
            style.pop("fg" if c == 39 else "bg", None)
        elif c in (38, 48) and i + 1 < len(codes):
            key = "fg" if c == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                style[key] = color256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                style[key] = "#%02x%02x%02x" % tuple(codes[i + 2 : i + 5])
                i += 4
        i += 1


def cells(line):
    """Yields (character, style) per cell of one captured line."""
    style = {}
    for token in re.findall(r"\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|(.)", line):
        params, char = token
        if char == "":
            if params is not None:
                apply_sgr(params, style)
            continue
        wide = unicodedata.east_asian_width(char) in ("W", "F")
        yield char, dict(style)
        if wide:
            yield "", dict(style)


def colours(style):
    fg, bg = style.get("fg", FG), style.get("bg")
    if style.get("reverse"):
        fg, bg = bg or BG, fg
    return fg, bg


def render(lines, cols, rows):
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="14" '
        'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">' % (cols * CELL_W, rows * CELL_H),
        '<rect width="100%%" height="100%%" fill="%s"/>' % BG,
    ]
    for row, line in enumerate(lines[:rows]):
        y = row * CELL_H
        runs = []
        for col, (char, style) in enumerate(cells(line)):
            key = tuple(sorted(style.items()))
            if runs and runs[-1][1] == key and runs[-1][0] + len(runs[-1][2]) == col:
                runs[-1][2].append(char)
            else:
                runs.append((col, key, [char]))
        for col, key, chars in runs:
            style = dict(key)
            fg, bg = colours(style)
            if bg:
                out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>'
                           % (col * CELL_W, y, len(chars) * CELL_W, CELL_H, bg))
            text = "".join(chars)
            if not text.strip():
                continue
            attrs = ' fill="%s"' % fg
            if style.get("bold"):
                attrs += ' font-weight="bold"'
            if style.get("dim"):
                attrs += ' opacity="0.6"'
            if style.get("italic"):
                attrs += ' font-style="italic"'
            if style.get("underline"):
                attrs += ' text-decoration="underline"'
            out.append('<text x="%.1f" y="%.1f" textLength="%.1f" lengthAdjust="spacingAndGlyphs" '
                       'xml:space="preserve"%s>%s</text>'
                       % (col * CELL_W, y + CELL_H * 0.78, len(chars) * CELL_W, attrs, escape(text)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: ansi2svg.py CAPTURE COLS ROWS")
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    sys.stdout.write(render(lines, int(sys.argv[2]), int(sys.argv[3])))


if __name__ == "__main__":
    main()
