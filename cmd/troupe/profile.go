package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts what serve's --cpuprofile and --memprofile ask for
// and returns the function that finishes them at exit. Profiles of the real
// binary under `troupe bench` are how performance work finds its targets;
// the files are written only where the operator says.
func startProfiles(cpuPath, memPath string) (stop func() error, err error) {
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("cpu profile %s: %w", cpuPath, err)
		}
	}
	if memPath != "" {
		// Sample every allocation: the profile is for finding the
		// allocations of one call, and a run that asks for it is a
		// measurement, not production.
		runtime.MemProfileRate = 1
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if memPath != "" {
			errs = append(errs, writeHeapProfile(memPath))
		}
		return errors.Join(errs...)
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile %s: %w", path, err)
	}
	return f.Close()
}
