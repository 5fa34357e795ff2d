// CI's no-OpenMP compiler (.ci/no-openmp/g++) finds this omp.h first: only
// autograd/kernels/threads.h may include <omp.h>, and only when the build has OpenMP.
#error "omp.h included in a build without OpenMP: call the wrappers of autograd/kernels/threads.h"
