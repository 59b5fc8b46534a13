package simimage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

// draw paints a width×height picture that depends only on h: a gradient
// between two colours of the hash, crossed by rings around a point of
// it. It is a simulator's picture, not a generated image.
func draw(width, height int, h uint64) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	c1 := color.NRGBA{uint8(h), uint8(h >> 8), uint8(h >> 16), 255}
	c2 := color.NRGBA{uint8(h >> 24), uint8(h >> 32), uint8(h >> 40), 255}
	cx, cy := float64(h>>48&0xff)/255*float64(width), float64(h>>56)/255*float64(height)
	ring := float64(8 + h%24)
	for y := range height {
		for x := range width {
			t := (float64(x)/float64(width) + float64(y)/float64(height)) / 2
			d := math.Hypot(float64(x)-cx, float64(y)-cy)
			if int(d/ring)%2 == 0 {
				t = 1 - t
			}
			o := img.PixOffset(x, y)
			img.Pix[o] = lerp(c1.R, c2.R, t)
			img.Pix[o+1] = lerp(c1.G, c2.G, t)
			img.Pix[o+2] = lerp(c1.B, c2.B, t)
			img.Pix[o+3] = 255
		}
	}
	return img
}

func lerp(a, b uint8, t float64) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*t) }

// writePNG writes a picture to path.
func writePNG(path string, img *image.NRGBA) error {
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// glb is a binary glTF 2.0 file of one tetrahedron whose corners depend
// on h: a valid mesh that 3D viewers open.
func glb(h uint64) []byte {
	s := 0.5 + float32(h%100)/200
	pos := []float32{0, s, 0, -s, -s, s, s, -s, s, 0, -s, -s}
	idx := []uint16{0, 1, 2, 0, 2, 3, 0, 3, 1, 1, 3, 2}
	var bin bytes.Buffer
	_ = binary.Write(&bin, binary.LittleEndian, pos)
	_ = binary.Write(&bin, binary.LittleEndian, idx)
	for bin.Len()%4 != 0 {
		bin.WriteByte(0)
	}
	doc := map[string]any{
		"asset":  map[string]any{"version": "2.0", "generator": "llmgw simimage (a simulator)"},
		"scene":  0,
		"scenes": []any{map[string]any{"nodes": []int{0}}},
		"nodes":  []any{map[string]any{"mesh": 0}},
		"meshes": []any{map[string]any{"primitives": []any{map[string]any{"attributes": map[string]int{"POSITION": 0}, "indices": 1}}}},
		"accessors": []any{
			map[string]any{"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3", "min": []float32{-s, -s, -s}, "max": []float32{s, s, s}},
			map[string]any{"bufferView": 1, "componentType": 5123, "count": 12, "type": "SCALAR"},
		},
		"bufferViews": []any{
			map[string]any{"buffer": 0, "byteOffset": 0, "byteLength": 48, "target": 34962},
			map[string]any{"buffer": 0, "byteOffset": 48, "byteLength": 24, "target": 34963},
		},
		"buffers": []any{map[string]any{"byteLength": bin.Len()}},
	}
	js, _ := json.Marshal(doc)
	for len(js)%4 != 0 {
		js = append(js, ' ')
	}
	var out bytes.Buffer
	total := 12 + 8 + len(js) + 8 + bin.Len()
	_ = binary.Write(&out, binary.LittleEndian, []uint32{0x46546C67, 2, uint32(total)}) // "glTF", version 2
	_ = binary.Write(&out, binary.LittleEndian, []uint32{uint32(len(js)), 0x4E4F534A})  // JSON
	out.Write(js)
	_ = binary.Write(&out, binary.LittleEndian, []uint32{uint32(bin.Len()), 0x004E4942}) // BIN
	out.Write(bin.Bytes())
	return out.Bytes()
}
