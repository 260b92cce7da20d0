"""Decode an image file into what every image step sees: RGB, upright, alpha flattened on white, first frame.

Each way a file can fail maps to one reason code, so a drop says what was wrong with the file.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's own decompression-bomb limit
DECODE_BLOCK_BYTES = 1 << 22  # bytes handed to the decoder per call (Pillow: 64 KB): the GIL is released per call
# file suffixes taken as images, by the pipeline and by `curate images hash` alike (Pillow decodes all of them)
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".pgm", ".pbm", ".ppm", ".pnm")
BACKGROUND_RGB = (255, 255, 255)
BACKGROUND_GREY = round(0.299 * BACKGROUND_RGB[0] + 0.587 * BACKGROUND_RGB[1] + 0.114 * BACKGROUND_RGB[2])
EXIF_ORIENTATION = 0x0112

DECODE_REASONS = (
    "image_empty",
    "image_unreadable",
    "image_truncated",
    "image_too_large",
    "image_missing",
    "image_unsupported_format",
)
# formats people put in image folders that Pillow cannot decode, by their first bytes
LEADING_SIGNATURES = ((b"<svg", "SVG"), (b"<?xml", "SVG or other XML"), (b"%PDF", "PDF"))
BOX_BRANDS = {b"heic": "HEIC", b"heix": "HEIC", b"mif1": "HEIF", b"msf1": "HEIF"}  # ISO media 'ftyp' box


class ImageDecodeError(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class DecodedImage:
    image: Image.Image
    format: str
    width: int  # of the upright image at full size, even when decoded smaller
    height: int


def _flatten(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, BACKGROUND_RGB)
        canvas.paste(rgba, mask=rgba)  # an RGBA mask is its alpha band, without a copy of it
        return canvas
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16-bit greys (any byte order; Pillow's point() refuses the big-endian one): the high byte of each value
        values = np.clip(np.asarray(image).astype(np.int64), 0, 65535) >> 8
        return Image.fromarray(values.astype(np.uint8), mode="L").convert("RGB")
    return image.convert("RGB")


def _flatten_grey(image: Image.Image) -> Image.Image:
    """What `_flatten(image).convert("L")` gives (to a grey level), without the full-size RGB image between."""
    if image.mode == "L":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        with_alpha = image if image.mode in ("RGBA", "LA") else image.convert("RGBA")
        canvas = Image.new("L", with_alpha.size, BACKGROUND_GREY)
        canvas.paste(with_alpha.convert("L"), mask=with_alpha.getchannel("A"))
        return canvas
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        return _flatten(image).convert("L")
    return image.convert("L")


def _reduced(image: Image.Image, side_px: int) -> Image.Image:
    """A flattened (RGB or L) image shrunk by the largest whole factor that keeps both sides at least `side_px`
    (what the JPEG draft does in the decoder, for the formats that cannot draft), by box averages over the whole
    extent: a mirror image or a turn of the file shrinks to the same turn of this (Image.reduce leaves a side's
    remainder at one end)."""
    factor = min(image.size) // side_px
    if factor < 2:
        return image
    return image.resize((image.width // factor, image.height // factor), Image.Resampling.BOX)


def _webp_still(data: bytes, mode: str) -> Image.Image | None:
    """A still WebP's pixels in `mode` (RGB, or RGBA: as Pillow opened it), decoded by libwebp's own decoding call
    (the `webp` package), else None: an animation, another mode, or a file libwebp refuses, which Pillow then decodes
    (and says why it cannot). The same pixels as Pillow's load, which decodes every WebP as an animation and copies
    each frame twice: 1.4x the time, on 35 real 16 MP wallpapers."""
    if mode not in ("RGB", "RGBA"):
        return None
    from webp import ffi, lib  # on first use: the library is loaded when a WebP file is decoded

    config = ffi.new("WebPDecoderConfig*")
    source = ffi.from_buffer(data)
    features = ffi.addressof(config, "input")
    if not lib.WebPInitDecoderConfig(config) or lib.WebPGetFeatures(source, len(data), features) != lib.VP8_STATUS_OK:
        return None
    if config.input.has_animation:  # Pillow's first frame, composed on its canvas
        return None
    size, bands = (config.input.width, config.input.height), len(mode)
    pixels = bytearray(size[0] * size[1] * bands)
    config.output.colorspace = lib.MODE_RGBA if mode == "RGBA" else lib.MODE_RGB
    config.output.is_external_memory = 1
    config.output.u.RGBA.rgba = ffi.from_buffer(pixels)
    config.output.u.RGBA.stride = size[0] * bands
    config.output.u.RGBA.size = len(pixels)
    if lib.WebPDecode(source, len(data), config) != lib.VP8_STATUS_OK:
        return None
    return Image.frombuffer(mode, size, pixels, "raw", mode, 0, 1)


def _unsupported_format(data: bytes) -> str | None:
    head = data[:64]
    if head[4:8] == b"ftyp" and head[8:12] in BOX_BRANDS:
        return BOX_BRANDS[head[8:12]]
    return next((name for signature, name in LEADING_SIGNATURES if head.lstrip().startswith(signature)), None)


# EXIF orientation -> the turn that makes the picture upright (as ImageOps.exif_transpose does)
UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _upright(opened: Image.Image, image: Image.Image) -> Image.Image:
    """`image` (the decoded `opened`, perhaps reduced) turned as the file's EXIF orientation says; the same object
    when there is nothing to turn."""
    turn = UPRIGHT.get(opened.getexif().get(EXIF_ORIENTATION, 1))
    return image.transpose(turn) if turn is not None else image


def decode_image(
    path: Path,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    draft_side_px: int | None = None,
    data: bytes | None = None,
    grey: bool = False,
    shrink_all: bool = False,
) -> DecodedImage:
    """Decode `path` (or its bytes, when already read); raise ImageDecodeError with a reason when unusable.

    With `draft_side_px`, a JPEG is decoded by libjpeg at the smallest of 1/2, 1/4 or 1/8 scale that keeps both
    sides at least that many pixels (several times faster, and enough for a 32x32 perceptual hash); with
    `shrink_all` too, any other image is box-averaged by the largest whole factor that does the same (for the
    hashes: a finer comparison, such as the thumbnails' borders, wants the full picture). With `grey`, the image is greyscale
    (mode L, alpha flattened on white as for RGB): what the hashes need, made without a full-size RGB copy."""
    if data is None:
        if not path.exists():
            raise ImageDecodeError("image_missing", f"{path} does not exist")
        data = path.read_bytes()
    if not data:
        raise ImageDecodeError("image_empty", f"{path} is empty (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit applies below
            # decoding from memory: nothing to close, so an RGB image needs no defensive copy
            opened = Image.open(io.BytesIO(data))
            fmt = opened.format or "unknown"
            if opened.width * opened.height > max_pixels:
                raise ImageDecodeError(
                    "image_too_large",
                    f"{opened.width}x{opened.height} exceeds the {max_pixels:,}-pixel limit (max_pixels)",
                )
            full_size = opened.size
            if draft_side_px and fmt == "JPEG":  # in grey, libjpeg also skips the colour conversion
                opened.draft("L" if grey else "RGB", (draft_side_px, draft_side_px))
            loaded = _webp_still(data, opened.mode) if fmt == "WEBP" else None
            if loaded is None:
                opened.decodermaxblock = DECODE_BLOCK_BYTES  # fewer, longer decoder calls: the bytes are in memory
                opened.load()
                loaded = opened
            flat = _flatten_grey(loaded) if grey else _flatten(loaded)
            if draft_side_px and shrink_all and fmt != "JPEG":
                flat = _reduced(flat, draft_side_px)
            image = _upright(opened, flat)
            if image.size != flat.size:  # the orientation swapped the sides
                full_size = full_size[::-1]
    except ImageDecodeError:
        raise
    except Image.DecompressionBombError as error:  # over twice Pillow's own limit: refused while opening
        found = re.search(r"\((\d+) pixels\)", str(error))  # Pillow's message, whose limit is not the user's
        pixels = int(found.group(1)) if found else None
        if pixels is not None and pixels <= max_pixels:  # a max_pixels above what Pillow opens at all
            raise ImageDecodeError(
                "image_too_large", f"{pixels:,} pixels: more than Pillow opens ({error}); max_pixels cannot raise that"
            ) from error
        size = "the image exceeds" if pixels is None else f"{pixels:,} pixels exceed"
        raise ImageDecodeError("image_too_large", f"{size} the {max_pixels:,}-pixel limit (max_pixels)") from error
    except UnidentifiedImageError as error:
        known = _unsupported_format(data)
        if known:
            raise ImageDecodeError("image_unsupported_format", f"{known} files are not supported") from error
        raise ImageDecodeError(
            "image_unreadable", f"not an image: no format Pillow knows starts with {data[:8]!r}"
        ) from error
    except OSError as error:
        reason = "image_truncated" if "truncated" in str(error).lower() else "image_unreadable"
        raise ImageDecodeError(reason, f"{type(error).__name__}: {error}") from error
    except (ValueError, SyntaxError) as error:
        raise ImageDecodeError("image_unreadable", f"{type(error).__name__}: {error}") from error
    return DecodedImage(image=image, format=fmt, width=full_size[0], height=full_size[1])
