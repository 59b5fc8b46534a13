// Package layers holds no code: its tests check the module's layout, that
// the arrows between packages point one way and that no package outgrows
// its bound.
package layers
