package simimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	imgdraw "image/draw"
	"image/jpeg"
	_ "image/png" // LoadImage reads PNG uploads

	_ "golang.org/x/image/webp" // and WebP ones
)

// transform runs the nodes that change pictures or latents of an image
// to image workflow: ImageScale, ImageBlend, RepeatLatentBatch and
// SetLatentNoiseMask.
func transform(n node, in func(string) value, h uint64) ([]value, map[string]any, error) {
	switch n.ClassType {
	case "ImageScale":
		src := in("image")
		w, hh := intInput(n, "width", 0), intInput(n, "height", 0)
		if w == 0 && hh == 0 || src.width == 0 || src.height == 0 {
			w, hh = src.width, src.height
		} else if w == 0 {
			w = src.width * hh / src.height
		} else if hh == 0 {
			hh = src.height * w / src.width
		}
		if w < 1 || hh < 1 || w > 16384 || hh > 16384 {
			return nil, nil, errors.New("width and height must be 1 to 16384")
		}
		src.width, src.height, src.hash = w, hh, h
		return []value{src}, nil, nil
	case "ImageBlend":
		a, b := in("image1"), in("image2")
		a.pixels, a.hash = blend(a.pixels, b.pixels, floatInput(n, "blend_factor", 0.5)), h
		return []value{a}, nil, nil
	case "RepeatLatentBatch":
		src := in("samples")
		amount := intInput(n, "amount", 1)
		if amount < 1 || amount > 64 {
			return nil, nil, errors.New("amount must be 1 to 64")
		}
		src.batch, src.hash = max(src.batch, 1)*amount, h
		return []value{src}, nil, nil
	default: // SetLatentNoiseMask
		src := in("samples")
		src.hash = h
		return []value{src}, nil, nil
	}
}

// decodePicture reads a PNG, JPEG or WebP: its pixels and size.
func decodePicture(b []byte) (*image.NRGBA, int, int, error) {
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, 0, 0, err
	}
	r := img.Bounds()
	pix := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	imgdraw.Draw(pix, pix.Bounds(), img, r.Min, imgdraw.Src)
	return pix, r.Dx(), r.Dy(), nil
}

// blend mixes b into a (at a's size) by factor; either may be nil.
func blend(a, b *image.NRGBA, factor float64) *image.NRGBA {
	if a == nil || b == nil {
		if a == nil {
			return b
		}
		return a
	}
	out := image.NewNRGBA(a.Bounds())
	factor = min(max(factor, 0), 1)
	w, h := a.Rect.Dx(), a.Rect.Dy()
	for y := range h {
		for x := range w {
			o := out.PixOffset(x, y)
			p := sampleAt(b, x, y, w, h)
			for c := range 4 {
				out.Pix[o+c] = lerp(a.Pix[o+c], p[c], factor)
			}
		}
	}
	return out
}

// sampleAt is src's pixel at (x, y) of a w×h picture it is stretched to.
func sampleAt(src *image.NRGBA, x, y, w, h int) []uint8 {
	sx, sy := x*src.Rect.Dx()/w, y*src.Rect.Dy()/h
	o := src.PixOffset(sx, sy)
	return src.Pix[o : o+4]
}

// paint draws picture i of img's batch: the simulator's pattern of its
// hash, over which an image to image workflow keeps its starting
// picture (its keep share), so that what comes out shows what went in.
func paint(img value, i int) *image.NRGBA {
	return paintAt(img, img.width, img.height, mix(img.hash, uint64(i)))
}

func paintAt(img value, w, h int, hash uint64) *image.NRGBA {
	out := draw(w, h, hash)
	if img.pixels == nil || img.keep <= 0 {
		return out
	}
	for y := range h {
		for x := range w {
			o := out.PixOffset(x, y)
			p := sampleAt(img.pixels, x, y, w, h)
			for c := range 3 {
				out.Pix[o+c] = lerp(out.Pix[o+c], p[c], img.keep)
			}
		}
	}
	return out
}

// previewFrame is a binary WebSocket message of ComfyUI's for a sampler
// step's preview: event 1 (PREVIEW_IMAGE), format 1 (JPEG), then a
// JPEG of the latent's picture at an eighth of its size, as ComfyUI's
// latent2rgb previews are.
func previewFrame(lat value, step, steps int) []byte {
	w, h := max(lat.width/8, 8), max(lat.height/8, 8)
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.BigEndian, []uint32{1, 1})
	_ = jpeg.Encode(&buf, paintAt(lat, w, h, mix(lat.hash, uint64(step)<<32|uint64(steps))), &jpeg.Options{Quality: 80})
	return buf.Bytes()
}
