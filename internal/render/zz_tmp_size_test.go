package render
import "testing"
func TestTmpSize(t *testing.T) { d, _ := TalosMachineConfig(testTalosFullInput()); t.Logf("len=%d", len(d)); d, _ = TalosMachineConfig(testTalosInput()); t.Logf("len=%d", len(d)) }
