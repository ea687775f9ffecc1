// The host area alone (nezha_hostcoll.h), no Python or MPI: fork n ranks, map, time K allreduces
// in 7 batches (median/min per call), check against the sum. Build and run:
//   gcc -O3 -std=gnu11 -Wno-unused-function -Iinclude -o /tmp/hcbench hcbench.c -lpthread
//   /tmp/hcbench NRANKS BYTES ITERS CHUNK SPIN_US [inplace=1]
// standalone bench of the host area: fork n ranks, map, run allreduce K times
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include "nezha/nezha_hostcoll.h"
#ifndef ALLRED
#define ALLRED nz_hc_allreduce
#endif
typedef struct { pthread_barrier_t b; double t[256]; double cpu[256]; int bad[256]; double bt[64]; } sh_t;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double cpus(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec*1e-6+r.ru_stime.tv_sec+r.ru_stime.tv_usec*1e-6;}
int main(int argc,char**argv){
  int n=atoi(argv[1]); size_t bytes=strtoull(argv[2],0,0); int iters=atoi(argv[3]);
  uint64_t chunk=strtoull(argv[4],0,0); double spin=atof(argv[5]);
  int inplace = argc>6 ? atoi(argv[6]) : 1;
  sh_t*sh=mmap(0,sizeof(sh_t),PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  pthread_barrierattr_t a;pthread_barrierattr_init(&a);pthread_barrierattr_setpshared(&a,PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->b,&a,n);
  char name[64];snprintf(name,64,"/hcb-%d",getpid());uint8_t nonce[32]={1};
  for(int r=0;r<n;r++) if(!fork()){
    nz_hc_t h;nz_hc_init(&h);
    if(r==0){int rc=nz_hc_map(&h,name,0,n,chunk,nonce);if(rc){printf("map %d\n",rc);exit(1);}}
    pthread_barrier_wait(&sh->b);
    if(r){int rc=nz_hc_map(&h,name,r,n,chunk,nonce);if(rc){printf("map %d\n",rc);exit(1);}}
    pthread_barrier_wait(&sh->b);
    if(r==0) shm_unlink(name);
    h.spin_us=(int64_t)(spin);
    size_t cnt=bytes/4; float*in=malloc(bytes),*out=inplace?in:malloc(bytes);
    int bad=0; uint64_t seq=0;
    for(int it=-2;it<=iters;it++){
      if(it==iters){sh->t[r]=now()-sh->t[r]; sh->cpu[r]=cpus()-sh->cpu[r];}
      static double bt0; int nb=7, per=iters/nb>0?iters/nb:1;
      if(it==0){pthread_barrier_wait(&sh->b);sh->t[r]=now();sh->cpu[r]=cpus();}
      if(it>=0 && it<iters && it%per==0 && it/per<nb){ if(it) { if(r==0) sh->bt[it/per-1]=(now()-bt0)/per; } pthread_barrier_wait(&sh->b); bt0=now(); }
      if(it==nb*per && r==0) sh->bt[nb-1]=(now()-bt0)/per;
      int check = it==-2 || it==iters;
      if(check) for(size_t i=0;i<cnt;i++) in[i]=(float)((i*7+r*13)%1000);
      int rc=ALLRED(&h,(char*)in,(char*)out,cnt,4,NEZHA_DT_FLOAT32,NEZHA_OP_SUM,0,1,seq++,30.0);
      if(rc){printf("rank %d rc %d\n",r,rc);exit(1);}
      if(check){ for(size_t i=0;i<cnt;i++){float e=0;for(int k=0;k<n;k++)e+=(float)((i*7+k*13)%1000); if(out[i]!=e){bad++;if(bad<3)printf("bad r%d i%zu %f %f\n",r,i,out[i],e);}}}
    }
    sh->bad[r]=bad;
    exit(0);
  }
  for(int r=0;r<n;r++) wait(0);
  qsort(sh->bt,7,sizeof(double),cmpd);
  double t=0,c=0;int bad=0;for(int r=0;r<n;r++){if(sh->t[r]>t)t=sh->t[r];c+=sh->cpu[r];bad+=sh->bad[r];}
  // checked iterations included: only last iter is checked inside timing
  printf("n=%d bytes=%zu chunk=%lu spin=%g: med %.1f min %.1f | mean %.1f us/call, cpu %.1f us/call (%.2f cores), busbw %.2f GB/s bad=%d\n",
    n,bytes,(unsigned long)chunk,spin,sh->bt[3]*1e6,sh->bt[0]*1e6,t/iters*1e6,c/iters*1e6,c/t,bytes*2.0*(n-1)/n/(t/iters)/1e9,bad);
  return 0;
}
