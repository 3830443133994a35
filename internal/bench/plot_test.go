package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestTimelinePNG: a timeline's plot is a PNG image with both panels drawn; a plot that cannot
// be written (no such directory) is an error.
func TestTimelinePNG(t *testing.T) {
	r := &TimelineResult{Scenario: TimelineBurst, EventAt: 2, EventEnd: 4}
	for i := range 8 {
		r.Points = append(r.Points, TimelinePoint{T: float64(i), DeliveryUs: 400 + float64(i), ConfirmUs: 2000,
			AppendsPerS: []int{3000, 3000 + 100*i}, Quotas: []int64{3, 3}})
	}
	path := filepath.Join(t.TempDir(), "timeline.png")
	if err := r.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the plot is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 900 || b.Dy() < 620 {
		t.Fatalf("the plot is %v; want at least 900×620", b)
	}
	if err := r.WritePNG(filepath.Join(t.TempDir(), "missing", "x.png")); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}
