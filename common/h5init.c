/* h5init.c: see h5init.h. */
#include "common/h5init.h"

#include <hdf5.h>
#include <pthread.h>

static pthread_once_t h5_once = PTHREAD_ONCE_INIT;

static void h5_setup(void)
{
    /* Must come before the library initialises itself: it then registers no
     * atexit shutdown. It fails harmlessly when some HDF5 call came first. */
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void h5_init(void)
{
    pthread_once(&h5_once, h5_setup);
    /* The error printer is per thread in a thread-safe HDF5; set it here too. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}
