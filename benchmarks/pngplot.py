"""A tiny PNG line plot (white background, axes with tick marks, polylines) from zlib and struct only.

No text is drawn: the caller prints what the axes mean and their ranges.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Canvas", "line_plot", "nice_step", "write_png"]

Color = tuple[int, int, int]
Point = tuple[float, float]
#: Distinguishable line colours, in the order series are drawn.
PALETTE: tuple[Color, ...] = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40))
_AXIS: Color = (0, 0, 0)
_GRID: Color = (225, 225, 225)


class Canvas:
    """An RGB raster with clipped pixel, line and rectangle drawing.

    Args:
        width: pixels across.
        height: pixels down.
        background: the fill colour.
    """

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        """Paint one pixel (ignored outside the canvas)."""
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i : i + 3] = bytes(color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, thickness: int = 1) -> None:
        """Draw a straight line (Bresenham), ``thickness`` pixels wide."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        half = thickness // 2
        while True:
            for ox in range(-half, thickness - half):
                for oy in range(-half, thickness - half):
                    self.set(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def png(self) -> bytes:
        """The canvas as PNG bytes (8-bit RGB, no filtering)."""
        stride = 3 * self.width
        raw = b"".join(b"\x00" + bytes(self.pixels[y * stride : (y + 1) * stride]) for y in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def nice_step(span: float, ticks: int = 8) -> float:
    """A 1, 2 or 5 times a power of ten that cuts ``span`` into about ``ticks`` parts."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def line_plot(
    series: Sequence[Sequence[Point]],
    *,
    width: int = 900,
    height: int = 420,
    colors: Sequence[Color] = PALETTE,
    steps: bool = True,
) -> Canvas:
    """Plot each series as a polyline on shared axes starting at (0, 0).

    Args:
        series: lists of ``(x, y)`` points, each sorted by x.
        width: image width in pixels.
        height: image height in pixels.
        colors: one colour per series, reused in turn.
        steps: draw each series as a step function (a value holds until the next point).

    Returns:
        The drawn canvas (``write_png`` saves it).
    """
    canvas = Canvas(width, height)
    left, right, top, bottom = 40, width - 15, 15, height - 30
    points = [p for s in series for p in s]
    x_max = max((x for x, _ in points), default=1.0) or 1.0
    y_max = max((y for _, y in points), default=1.0) or 1.0
    x_step, y_step = nice_step(x_max), nice_step(y_max, 6)
    y_max = math.ceil(y_max / y_step) * y_step

    def px(x: float) -> int:
        return round(left + (right - left) * x / x_max)

    def py(y: float) -> int:
        return round(bottom - (bottom - top) * y / y_max)

    for i in range(1, round(y_max / y_step) + 1):
        y = py(i * y_step)
        canvas.line(left, y, right, y, _GRID)
        canvas.line(left - 6, y, left, y, _AXIS)
    for i in range(1, int(x_max / x_step) + 1):
        x = px(i * x_step)
        canvas.line(x, bottom, x, bottom + 6, _AXIS)
    canvas.line(left, top, left, bottom, _AXIS)
    canvas.line(left, bottom, right, bottom, _AXIS)
    for index, points_ in enumerate(series):
        color = colors[index % len(colors)]
        previous: tuple[int, int] | None = None
        for x, y in points_:
            here = (px(x), py(y))
            if previous is not None:
                if steps:
                    canvas.line(previous[0], previous[1], here[0], previous[1], color, 2)
                    canvas.line(here[0], previous[1], here[0], here[1], color, 2)
                else:
                    canvas.line(*previous, *here, color, 2)
            previous = here
        if previous is not None and steps:
            canvas.line(previous[0], previous[1], right, previous[1], color, 2)
    return canvas


def write_png(path: str | Path, canvas: Canvas) -> Path:
    """Save ``canvas`` as a PNG file, creating its folder.

    Args:
        path: where to write.
        canvas: what to write.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canvas.png())
    return path


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
